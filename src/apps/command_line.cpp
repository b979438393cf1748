#include "command_line.hpp"

#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <iostream>
#include <limits>
#include <typeinfo>

#include "commands.hpp"

namespace po = boost::program_options;

namespace atomr::apps {
namespace {

// The hidden option that collects arguments beyond the positional ones, so the error can name the
// first of them (boost's own error does not).
constexpr const char* k_unexpected = "unexpected-argument";

// "-n/--iters", or "--many" where the option has no short name: how the errors name an option.
std::string option_label(const po::option_description& d) {
  const std::string long_form = d.long_name().empty() ? "" : "--" + d.long_name();
  // With no short name this falls back to the bare long name, which is not a short form.
  const std::string short_form = d.canonical_display_name(po::command_line_style::allow_dash_for_short);
  const bool has_short = short_form.size() == 2 && short_form[0] == '-';
  if (!has_short) return long_form;
  return long_form.empty() ? short_form : short_form + "/" + long_form;
}

// boost names an option "--iters" or "-n" in its errors; find the description behind that name.
const po::option_description* find_option(const po::options_description& all, const std::string& name) {
  if (name.rfind("--", 0) == 0) return all.find_nothrow(name.substr(2), false, false, false);
  return all.find_nothrow(name, false, false, false);  // "-n" matches the short name
}

// What a typed option takes, in words; empty for strings (any text is a valid string).
std::string what_it_takes(const po::option_description& d) {
  const auto* typed = dynamic_cast<const po::typed_value_base*>(d.semantic().get());
  if (typed == nullptr) return "";
  const std::type_info& t = typed->value_type();
  if (t == typeid(int) || t == typeid(long) || t == typeid(long long)) return "an integer";
  if (t == typeid(double) || t == typeid(float)) return "a number";
  return "";
}

bool looks_like_integer(const std::string& text) {
  std::size_t i = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  if (i == text.size()) return false;
  for (; i < text.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return false;
  }
  return true;
}

// The text given for `d` on the command line (the first occurrence), for the error line.
std::string given_value(const po::parsed_options& parsed, const po::option_description& d) {
  for (const auto& o : parsed.options) {
    if (o.string_key == d.key("") && !o.value.empty()) return o.value.front();
  }
  return "";
}

// boost's error text says what went wrong but not what the option takes, and spells the option
// the long way only; this names it as --help does ("-n/--iters") and says what it takes.
std::string describe(const po::error& e, const po::options_description& all, const po::parsed_options& parsed) {
  const auto* named = dynamic_cast<const po::error_with_option_name*>(&e);
  const po::option_description* d = named != nullptr ? find_option(all, named->get_option_name()) : nullptr;
  if (d == nullptr) return e.what();
  const std::string label = option_label(*d);
  const std::string takes = what_it_takes(*d);
  if (const auto* v = dynamic_cast<const po::validation_error*>(&e);
      v != nullptr && v->kind() == po::validation_error::invalid_option_value && !takes.empty()) {
    const std::string text = given_value(parsed, *d);
    if (takes == "an integer" && looks_like_integer(text)) return label + ": '" + text + "' is out of range";
    return label + ": '" + text + "' is not " + takes;
  }
  if (const auto* s = dynamic_cast<const po::invalid_syntax*>(&e); s != nullptr) {
    if (s->kind() == po::invalid_syntax::missing_parameter) {
      return label + ": needs a value" + (takes.empty() ? "" : " (" + takes + ")");
    }
    if (s->kind() == po::invalid_syntax::extra_parameter) return label + ": takes no value";
  }
  if (dynamic_cast<const po::multiple_occurrences*>(&e) != nullptr) return label + ": given more than once";
  return e.what();
}

}  // namespace

std::optional<int> parse_command_line(const std::string& program, const std::vector<std::string>& args,
                                      const po::options_description& visible, const po::options_description& all,
                                      const po::positional_options_description& positional, const std::string& usage,
                                      po::variables_map& vm) {
  po::options_description with_rest;
  with_rest.add(all);
  with_rest.add_options()(k_unexpected, po::value<std::vector<std::string>>(), "");
  po::positional_options_description places = positional;
  if (positional.max_total_count() != std::numeric_limits<unsigned>::max()) places.add(k_unexpected, -1);
  po::parsed_options parsed(&with_rest);
  try {
    parsed = po::command_line_parser(args).options(with_rest).positional(places).run();
    po::store(parsed, vm);
  } catch (const po::error& e) {
    return usage_error(program, describe(e, with_rest, parsed), usage);
  }
  if (vm.count(k_unexpected)) {
    return usage_error(program, "unexpected argument '" + vm[k_unexpected].as<std::vector<std::string>>().front() + "'",
                       usage);
  }
  if (vm.count("help")) {
    std::cout << usage << "\n\n" << visible;
    return 0;
  }
  po::notify(vm);
  return std::nullopt;
}

int usage_error(const std::string& program, const std::string& message, const std::string& usage) {
  const std::string command = program.empty() ? "atomr" : "atomr " + program;
  report_error(message + " (try '" + command + " --help')", 2);
  std::cerr << usage.substr(0, usage.find('\n')) << '\n';
  return 2;
}

std::string must_be_at_least(long long min, long long got) {
  return "must be at least " + std::to_string(min) + ", got " + std::to_string(got);
}

std::string one_of(const std::vector<std::string>& choices) {
  std::string out;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  }
  return out;
}

result<std::size_t> parse_size(const std::string& text) {
  const auto not_a_size = [&] {
    return error(errc::invalid_argument, "'" + text + "' is not a size (e.g. 4096, 4K, 64M, 1G)");
  };
  // std::stoull would take " 8" and "-1" (as 2^64 - 1): a size starts with a digit.
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return not_a_size();
  std::size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &pos);
  } catch (const std::out_of_range&) {
    return error(errc::invalid_argument, "'" + text + "' is too large");
  } catch (const std::exception&) {
    return not_a_size();
  }
  const std::string unit = text.substr(pos);
  const int shift = unit.empty() ? 0 : unit == "K" ? 10 : unit == "M" ? 20 : unit == "G" ? 30 : -1;
  if (shift < 0 || v == 0) return not_a_size();
  if (v > (std::numeric_limits<std::size_t>::max() >> shift)) {
    return error(errc::invalid_argument, "'" + text + "' is too large");
  }
  return static_cast<std::size_t>(v) << shift;
}

result<void> check_output_file(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return error(errc::invalid_argument, "needs a file name");
  std::error_code ec;
  if (fs::is_directory(path, ec)) return error(errc::invalid_argument, "'" + path + "' is a directory");
  const fs::path parent = fs::path(path).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  if (!fs::is_directory(dir, ec)) return error(errc::invalid_argument, "'" + path + "': no directory '" + dir + "'");
  const bool exists = fs::exists(path, ec);
  if (::access(exists ? path.c_str() : dir.c_str(), W_OK) != 0) {
    return error(errc::invalid_argument,
                 "'" + path + "': cannot write " + (exists ? std::string("it") : "in '" + dir + "'"));
  }
  return ok();
}

}  // namespace atomr::apps
