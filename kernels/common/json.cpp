// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/workloads/common/json.hpp>

#include <cmath>
#include <cstdio>

namespace tapeflow::cli {

std::string json_quote(std::string const& text)
{
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

json_object& json_object::raw(std::string const& key, std::string const& text)
{
  if (!body_.empty()) { body_ += ", "; }
  body_ += json_quote(key) + ": " + text;
  return *this;
}

json_object& json_object::add(std::string const& key, std::string const& value) { return raw(key, json_quote(value)); }

json_object& json_object::add(std::string const& key, double value)
{
  if (!std::isfinite(value)) { return raw(key, "null"); }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  return raw(key, buf);
}

json_object& json_object::add(std::string const& key, std::size_t value) { return raw(key, std::to_string(value)); }
json_object& json_object::add(std::string const& key, int value) { return raw(key, std::to_string(value)); }
json_object& json_object::add(std::string const& key, bool value) { return raw(key, value ? "true" : "false"); }
json_object& json_object::add(std::string const& key, json_object const& value) { return raw(key, value.str()); }

json_object& json_object::add(std::string const& key, std::vector<json_object> const& values)
{
  std::string text = "[";
  for (std::size_t i = 0; i < values.size(); ++i) { text += (i == 0 ? "" : ", ") + values[i].str(); }
  return raw(key, text + "]");
}

json_object& json_object::add(std::string const& key, std::vector<std::string> const& values)
{
  std::string text = "[";
  for (std::size_t i = 0; i < values.size(); ++i) { text += (i == 0 ? "" : ", ") + json_quote(values[i]); }
  return raw(key, text + "]");
}

json_object& json_object::add(std::string const& key, std::vector<std::size_t> const& values)
{
  std::string text = "[";
  for (std::size_t i = 0; i < values.size(); ++i) { text += (i == 0 ? "" : ", ") + std::to_string(values[i]); }
  return raw(key, text + "]");
}

}  // namespace tapeflow::cli
