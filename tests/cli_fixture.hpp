// SPDX-License-Identifier: Apache-2.0
// The CLI tests' fixture: runs the tapeflow executable in a scratch directory, with its output
// piped (no terminal) or on a pseudo-terminal (where the progress bar is drawn).
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <poll.h>
#include <pty.h>
#include <utmp.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef TAPEFLOW_CLI_PATH
#error "TAPEFLOW_CLI_PATH must name the tapeflow executable"
#endif

namespace tapeflow {

class Cli : public ::testing::Test {
 protected:
  void SetUp() override
  {
    dir_ = ::testing::TempDir() + "tapeflow_cli_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(std::system(("mkdir -p '" + dir_ + "'").c_str()), 0);
  }
  void TearDown() override { static_cast<void>(std::system(("rm -rf '" + dir_ + "'").c_str())); }

  /// Runs the CLI with `args`; returns its exit status and keeps its output in `output_`.
  int run(std::string const& args)
  {
    std::string const log = dir_ + "/log.txt";
    int const status = std::system((std::string{TAPEFLOW_CLI_PATH} + " " + args + " > '" + log + "' 2>&1").c_str());
    std::ifstream in(log);
    output_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string path(std::string const& name) const { return dir_ + "/" + name; }

  template <class T>
  void write(std::string const& name, std::vector<T> const& v) const
  {
    std::ofstream out(path(name), std::ios::binary);
    out.write(reinterpret_cast<char const*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  }

  template <class T>
  std::vector<T> read(std::string const& name) const
  {
    std::ifstream in(path(name), std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<T> v(bytes.size() / sizeof(T));
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
    return v;
  }

  /// Runs the CLI with `args` on a pseudo-terminal (stdout and stderr both), as a user at a
  /// terminal would; returns its exit status and keeps what the terminal showed in `output_`.
  ///
  /// This process holds the terminal's slave side open while the child runs, so the child's exit
  /// is no hang-up: reading until EIO at the hang-up (as forkpty invites) can lose what the child
  /// wrote last, still on its way from the slave to the master when the master reads EIO. Instead
  /// it reads while the child runs, and once it has exited, drains until the terminal stays quiet.
  int run_on_terminal(std::string const& args)
  {
    int master = -1;
    int slave = -1;
    if (openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) { return -1; }
    pid_t const pid = fork();
    if (pid < 0) {
      ::close(master);
      ::close(slave);
      return -1;
    }
    if (pid == 0) {
      ::close(master);
      if (login_tty(slave) != 0) { _exit(126); }  // a new session, the terminal as 0, 1 and 2
      execl("/bin/sh", "sh", "-c", (std::string{TAPEFLOW_CLI_PATH} + " " + args).c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    output_.clear();
    int status = 0;
    bool exited = false;
    for (;;) {
      pollfd fd{master, POLLIN, 0};
      // While the child runs, wake now and then to see whether it has exited; after, a terminal
      // quiet for a tenth of a second holds nothing more.
      int const ready = ::poll(&fd, 1, exited ? 100 : 20);
      if (ready > 0 && (fd.revents & POLLIN) != 0) {
        char buf[4096];
        ssize_t const n = ::read(master, buf, sizeof buf);
        if (n > 0) {
          output_.append(buf, static_cast<std::size_t>(n));
          continue;
        }
      }
      if (exited) { break; }
      exited = waitpid(pid, &status, WNOHANG) == pid;
    }
    ::close(master);
    ::close(slave);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  /// The file `name` as text.
  std::string text(std::string const& name) const
  {
    std::ifstream in(path(name));
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  std::string dir_;
  std::string output_;
};


}  // namespace tapeflow
