// SPDX-License-Identifier: Apache-2.0
// tapeflow_nvtx_recorder: an NVTX injection library (see nvtx_recorder.h). NVTX hands an attached
// tool its function tables through the export table passed to InitializeInjectionNvtx2; the
// recorder fills the slots of the calls it records and leaves the rest to NVTX (no-ops).
#include "nvtx_recorder.h"

#define NVTX_NO_IMPL  // declarations and types only: this library is the implementation
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#define TAPEFLOW_NVTX_RECORDER_EXPORT extern "C" __attribute__((visibility("default")))

// The opaque handle types of the NVTX API are pointers to these structs, which NVTX only
// declares: a tool defines them.
struct nvtxDomainRegistration_st {
  std::string name;
};
struct nvtxStringRegistration_st {
  nvtxDomainRegistration_st const* domain;
  std::string text;
};

namespace {

struct event {
  int kind;
  std::uint64_t thread;
  char const* domain;
  char const* message;
  int registered;
  int level;
};

struct recorder_state {
  std::mutex mutex;
  std::deque<nvtxDomainRegistration_st> domains;  // deques: stable addresses for the handles
  std::deque<nvtxStringRegistration_st> strings;
  std::unordered_set<std::string> texts;           // unregistered messages, interned
  std::vector<event> events;
  int attachments{0};
  std::string log_path;
};

// Never destroyed: NVTX calls may come from static destructors of the host process.
recorder_state& state()
{
  static auto* s = new recorder_state;
  return *s;
}

std::uint64_t this_thread()
{
  static std::atomic<std::uint64_t> next{0};
  thread_local std::uint64_t const id = ++next;
  return id;
}

// Open ranges per (thread, domain): NVTX push/pop stacks are per thread and per domain.
int& depth(nvtxDomainRegistration_st const* domain)
{
  thread_local std::vector<std::pair<nvtxDomainRegistration_st const*, int>> depths;
  for (auto& d : depths) {
    if (d.first == domain) { return d.second; }
  }
  depths.emplace_back(domain, 0);
  return depths.back().second;
}

char const* intern(recorder_state& s, char const* text)
{
  return s.texts.insert(std::string{text != nullptr ? text : ""}).first->c_str();
}

char const* domain_name(nvtxDomainRegistration_st const* domain)
{
  return domain != nullptr ? domain->name.c_str() : "";
}

int record_push(nvtxDomainRegistration_st const* domain, nvtxEventAttributes_t const* attributes)
{
  recorder_state& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  char const* message = "";
  int registered = 0;
  if (attributes != nullptr) {
    switch (attributes->messageType) {
      case NVTX_MESSAGE_TYPE_ASCII: message = intern(s, attributes->message.ascii); break;
      case NVTX_MESSAGE_TYPE_REGISTERED:
        if (attributes->message.registered != nullptr) {
          message = attributes->message.registered->text.c_str();
          registered = 1;
        }
        break;
      case NVTX_MESSAGE_TYPE_UNICODE: message = intern(s, "<wide-character message>"); break;
      default: break;
    }
  }
  int const level = depth(domain)++;
  s.events.push_back(event{TAPEFLOW_NVTX_PUSH, this_thread(), domain_name(domain), message, registered, level});
  return level;
}

int record_pop(nvtxDomainRegistration_st const* domain)
{
  recorder_state& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  int& d = depth(domain);
  int const level = d > 0 ? --d : -1;
  s.events.push_back(event{TAPEFLOW_NVTX_POP, this_thread(), domain_name(domain), "", 0, level});
  return level;
}

// ---- the NVTX calls the recorder implements ----

nvtxDomainHandle_t NVTX_API domain_create_a(char const* name)
{
  recorder_state& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.domains.push_back(nvtxDomainRegistration_st{name != nullptr ? name : ""});
  return &s.domains.back();
}

nvtxStringHandle_t NVTX_API domain_register_string_a(nvtxDomainHandle_t domain, char const* text)
{
  recorder_state& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.strings.push_back(nvtxStringRegistration_st{domain, text != nullptr ? text : ""});
  return &s.strings.back();
}

int NVTX_API domain_range_push_ex(nvtxDomainHandle_t domain, nvtxEventAttributes_t const* attributes)
{
  return record_push(domain, attributes);
}

int NVTX_API domain_range_pop(nvtxDomainHandle_t domain) { return record_pop(domain); }

int NVTX_API range_push_ex(nvtxEventAttributes_t const* attributes) { return record_push(nullptr, attributes); }

int NVTX_API range_push_a(char const* message)
{
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = message;
  return record_push(nullptr, &attributes);
}

int NVTX_API range_pop() { return record_pop(nullptr); }

// ---- attaching ----

template <class Function>
bool attach(NvtxFunctionTable table, unsigned int size, unsigned int id, Function* function)
{
  // `size` is the highest valid callback id of the module; slot 0 is unused.
  if (table == nullptr || id == 0 || id > size || table[id] == nullptr) { return false; }
  *table[id] = reinterpret_cast<NvtxFunctionPointer>(function);
  return true;
}

void write_log()
{
  recorder_state& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::FILE* out = std::fopen(s.log_path.c_str(), "w");
  if (out == nullptr) { return; }
  for (event const& e : s.events) {
    if (e.kind != TAPEFLOW_NVTX_PUSH) { continue; }
    std::fprintf(out, "thread %llu  domain %-10s %*s%s\n", static_cast<unsigned long long>(e.thread),
                 e.domain[0] != '\0' ? e.domain : "(global)", 2 * e.level, "", e.message);
  }
  std::fclose(out);
}

}  // namespace

// ---- the injection entry point and the log's C interface ----

TAPEFLOW_NVTX_RECORDER_EXPORT int NVTX_API InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table)
{
  if (get_export_table == nullptr) { return 0; }
  auto const* callbacks = static_cast<NvtxExportTableCallbacks const*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) ||
      callbacks->GetModuleFunctionTable == nullptr) {
    return 0;
  }
  NvtxFunctionTable core = nullptr;
  unsigned int core_size = 0;
  NvtxFunctionTable core2 = nullptr;
  unsigned int core2_size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) == 0 ||
      callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size) == 0) {
    return 0;
  }
  bool const attached = attach(core, core_size, NVTX_CBID_CORE_RangePushEx, &range_push_ex) &&
                        attach(core, core_size, NVTX_CBID_CORE_RangePushA, &range_push_a) &&
                        attach(core, core_size, NVTX_CBID_CORE_RangePop, &range_pop) &&
                        attach(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, &domain_create_a) &&
                        attach(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, &domain_register_string_a) &&
                        attach(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, &domain_range_push_ex) &&
                        attach(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, &domain_range_pop);
  if (!attached) { return 0; }

  if (auto const* version = static_cast<NvtxExportTableVersionInfo const*>(get_export_table(NVTX_ETID_VERSIONINFO));
      version != nullptr && version->struct_size >= sizeof(NvtxExportTableVersionInfo) &&
      version->SetInjectionNvtxVersion != nullptr) {
    version->SetInjectionNvtxVersion(NVTX_VERSION);
  }

  recorder_state& s = state();
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    first = s.attachments++ == 0;
    if (first) {
      char const* path = std::getenv("TAPEFLOW_NVTX_LOG");
      s.log_path = path != nullptr ? path : "";
    }
  }
  if (first && !s.log_path.empty()) { std::atexit(write_log); }
  return 1;
}

TAPEFLOW_NVTX_RECORDER_EXPORT int tapeflow_nvtx_recorder_attachments(void)
{
  recorder_state& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.attachments;
}

TAPEFLOW_NVTX_RECORDER_EXPORT size_t tapeflow_nvtx_recorder_size(void)
{
  recorder_state& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.events.size();
}

TAPEFLOW_NVTX_RECORDER_EXPORT int tapeflow_nvtx_recorder_get(size_t index, tapeflow_nvtx_event* out)
{
  recorder_state& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (out == nullptr || index >= s.events.size()) { return 0; }
  event const& e = s.events[index];
  *out = tapeflow_nvtx_event{e.kind, e.thread, e.domain, e.message, e.registered, e.level};
  return 1;
}

TAPEFLOW_NVTX_RECORDER_EXPORT void tapeflow_nvtx_recorder_clear(void)
{
  recorder_state& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.events.clear();
}

TAPEFLOW_NVTX_RECORDER_EXPORT uint64_t tapeflow_nvtx_recorder_thread(void) { return this_thread(); }
