// SPDX-License-Identifier: Apache-2.0
// A minimal JSON writer for the CLI's --json stats (objects, strings, numbers, booleans, arrays).
#pragma once

#include <string>
#include <vector>

namespace tapeflow::cli {

class json_object {
 public:
  json_object& add(std::string const& key, std::string const& value);
  json_object& add(std::string const& key, char const* value) { return add(key, std::string{value}); }
  json_object& add(std::string const& key, double value);
  json_object& add(std::string const& key, std::size_t value);
  json_object& add(std::string const& key, int value);
  json_object& add(std::string const& key, bool value);
  json_object& add(std::string const& key, json_object const& value);
  json_object& add(std::string const& key, std::vector<json_object> const& values);
  json_object& add(std::string const& key, std::vector<std::string> const& values);
  json_object& add(std::string const& key, std::vector<std::size_t> const& values);
  [[nodiscard]] std::string str() const { return "{" + body_ + "}"; }

 private:
  json_object& raw(std::string const& key, std::string const& text);
  std::string body_;
};

std::string json_quote(std::string const& text);

}  // namespace tapeflow::cli
