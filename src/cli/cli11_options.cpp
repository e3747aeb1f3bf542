// The table's options as CLI11 options: names, help, checks, environment
// variables and defaults come from option_table.cpp; here they meet CLI11.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

#include "cli/commands.hpp"
#include "util/time.hpp"

namespace nxlock::cli {

namespace {

// The OnlyNamedOptions that lives, if one does.
OnlyNamedOptions* s_only_named = nullptr;

// Whether an OnlyNamedOptions lives and leaves `spec` out.
bool left_out(const OptionSpec& spec) {
  return s_only_named != nullptr && !s_only_named->names(spec);
}

// "0.001", "1000000": readable, never hundreds of digits.
std::string seconds_text(double seconds) {
  return util::decimal_seconds(util::Micros(static_cast<std::int64_t>(seconds * 1e6)));
}

// A finite decimal number of seconds in [min, max]; the message names the
// bounds (a usage error, exit 64).
CLI::Validator seconds_check(double min_seconds, double max_seconds) {
  const std::string range = "[" + seconds_text(min_seconds) + " - " + seconds_text(max_seconds) + "]";
  return CLI::Validator(
      [=](std::string& input) -> std::string {
        // from_chars, not strtod: plain decimal only (no "0x10", no locale).
        double seconds = 0;
        const char* last = input.data() + input.size();
        const auto [end, ec] = std::from_chars(input.data(), last, seconds);
        // NaN compares false with everything and infinity overflows every
        // deadline: both are refused, as is anything out of range.
        if (input.empty() || ec != std::errc() || end != last || !std::isfinite(seconds) ||
            seconds < min_seconds || seconds > max_seconds) {
          return "'" + input + "' is not a number of seconds in " + range;
        }
        return {};
      },
      "NUMBER in " + range);
}

// A whole number in [min, max]. A ttl (`type_name` SECONDS) is said to be
// "a whole number of seconds"; a count keeps CLI::Range's words (without the
// std::stringstream its constructor builds for the description).
CLI::Validator whole_check(std::int64_t min, std::int64_t max, std::string_view type_name) {
  const std::string low = std::to_string(min);
  const std::string high = std::to_string(max);
  const bool seconds = type_name == "SECONDS";
  return CLI::Validator(
      [=](std::string& input) -> std::string {
        std::int64_t value = 0;
        const char* last = input.data() + input.size();
        const auto [end, ec] = std::from_chars(input.data(), last, value);
        if (!input.empty() && ec == std::errc() && end == last && value >= min && value <= max) {
          return {};
        }
        if (seconds) {
          return "'" + input + "' is not a whole number of seconds in [" + low + " - " + high + "]";
        }
        return "Value " + input + " not in range " + low + " to " + high;
      },
      "INT in [" + low + " - " + high + "]");
}

// One of the words of `choices` ("term kill ignore"), in CLI::IsMember's words.
CLI::Validator choice_check(std::string_view choices) {
  std::string set = "{" + std::string(choices) + "}";
  for (auto& c : set) {
    c = c == ' ' ? ',' : c;
  }
  return CLI::Validator(
      [choices = std::string(choices), set](std::string& input) -> std::string {
        std::string_view rest = choices;
        while (!rest.empty()) {
          const std::size_t space = rest.find(' ');
          if (rest.substr(0, space) == input) {
            return {};
          }
          rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
        }
        return input + " not in " + set;
      },
      set);
}

// An option that is not one here: the message is the help, which says what to use.
CLI::Validator refused_check(std::string_view advice) {
  return CLI::Validator([advice = std::string(advice)](std::string&) { return advice; }, "");
}

// No description: --help would print the type name twice ("STRING:STRING").
CLI::Validator nonempty_check() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        return input.empty() ? "the value must not be empty" : "";
      },
      "");
}

bool checked_from_environment(const OptionSpec& spec) {
  return spec.kind == ValueKind::seconds || spec.kind == ValueKind::whole ||
         spec.kind == ValueKind::choice;
}

// Applies the environment variable of `spec`, an option of `app`, unless the
// command line gave the option or one that excludes it (-n and NXLOCK_WAIT).
void apply_environment(CLI::App& app, const OptionSpec& spec) {
  const char* value = std::getenv(std::string(spec.env).c_str());
  CLI::Option* option = app.get_option_no_throw(std::string(long_name(spec)));
  if (value == nullptr || *value == '\0' || option == nullptr || option->count() > 0) {
    return;
  }
  for (const CLI::Option* other : option->get_excludes()) {
    if (other->count() > 0) {
      return;
    }
  }
  option->add_result(value);
  try {
    option->run_callback();
  } catch (const CLI::ValidationError& e) {
    // "--ttl: 'abc' is not ..." as "NXLOCK_TTL: 'abc' is not ...".
    const std::string what = e.what();
    const std::size_t colon = what.find(": ");
    throw CLI::ValidationError(std::string(spec.env),
                               colon == std::string::npos ? what : what.substr(colon + 2));
  }
}

// `check`, for a hidden option: CLI11 names no hidden option in its messages
// (its name is "" there), so the message names it itself.
CLI::Validator named(CLI::Validator check, const OptionSpec& spec) {
  if (!spec.hidden) {
    return check;
  }
  std::string description = check.get_description();
  return CLI::Validator(
      [check = std::move(check), name = std::string(long_name(spec))](std::string& input) {
        const std::string message = check(input);
        return message.empty() ? message : name + ": " + message;
      },
      description);
}

// What the table says beyond the names and the help.
CLI::Option* finish(CLI::Option* option, const OptionSpec& spec) {
  if (!spec.type_name.empty()) {
    option->type_name(std::string(spec.type_name));
  }
  switch (spec.kind) {
    case ValueKind::seconds:
      option->check(named(seconds_check(spec.min, spec.max), spec));
      break;
    case ValueKind::whole:
      option->check(named(whole_check(static_cast<std::int64_t>(spec.min),
                                      static_cast<std::int64_t>(spec.max), spec.type_name),
                          spec));
      break;
    case ValueKind::refused:
      option->check(named(refused_check(spec.help), spec));
      break;
    case ValueKind::choice:
      option->check(named(choice_check(spec.choices), spec));
      break;
    case ValueKind::nonempty:
      option->check(named(nonempty_check(), spec));
      break;
    case ValueKind::flag:
    case ValueKind::text:
      break;
  }
  // A checked value from the environment is applied after the parse
  // (apply_environment()), so that its errors name the variable and the
  // command line's options exclude it as they would a default.
  if (!spec.env.empty() && !checked_from_environment(spec)) {
    option->envname(std::string(spec.env));
  }
  if (spec.hidden) {
    option->group("");
  }
  return option;
}

// The default --help shows ("=60"), as CLI11's capture_default_str() would
// write it, without the std::stringstream it builds for a number.
std::string default_text(const std::string& value) {
  return value;
}
std::string default_text(const std::vector<std::string>& /*values*/) {
  return {};  // -u: none shown
}
std::string default_text(double value) {
  const auto whole = static_cast<std::int64_t>(value);
  return static_cast<double>(whole) == value ? std::to_string(whole) : seconds_text(value);
}
template <class T>
std::string default_text(T value) {
  return std::to_string(value);
}

template <class T>
CLI::Option* add_valued(CLI::App& app, std::string_view command, std::string_view name,
                        T& target) {
  const OptionSpec& spec = option_spec(command, name);
  if (left_out(spec)) {
    return s_only_named->unbound(app);
  }
  CLI::Option* option =
      finish(app.add_option(std::string(spec.names), target, std::string(spec.help)), spec);
  if (spec.show_default) {
    option->default_str(default_text(target));
  }
  return option;
}

}  // namespace

// An option of no app: what add_table_option() returns for one the words do
// not name. Never parsed, so never given.
struct OnlyNamedOptions::UnboundOption final : CLI::Option {
  explicit UnboundOption(CLI::App& app) : CLI::Option("", "", nullptr, &app) {}
};

OnlyNamedOptions::OnlyNamedOptions(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view word = argv[i];
    if (word.starts_with("--")) {
      m_long_names.push_back(word.substr(0, word.find('=')));
    } else if (word.starts_with("-")) {
      m_short_names.append(word.substr(1));  // -nq: -n and -q; -w5: -w (and a -5)
    }
  }
  s_only_named = this;
}

OnlyNamedOptions::~OnlyNamedOptions() {
  s_only_named = nullptr;
}

bool OnlyNamedOptions::asks_for_help() const {
  for (const std::string_view name : {"--help", "--help-all", "--version", "--dump-options"}) {
    if (std::find(m_long_names.begin(), m_long_names.end(), name) != m_long_names.end()) {
      return true;
    }
  }
  return m_short_names.find('h') != std::string::npos;
}

bool OnlyNamedOptions::names(const OptionSpec& spec) const {
  if (!spec.env.empty() && std::getenv(std::string(spec.env).c_str()) != nullptr) {
    return true;
  }
  std::string_view names = spec.names;
  while (!names.empty()) {
    const std::size_t comma = names.find(',');
    const std::string_view one = names.substr(0, comma);
    if (one.starts_with("--")
            ? std::find(m_long_names.begin(), m_long_names.end(), one) != m_long_names.end()
            : one.size() == 2 && m_short_names.find(one[1]) != std::string::npos) {
      return true;
    }
    names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
  }
  return false;
}

CLI::Option* OnlyNamedOptions::unbound(CLI::App& app) {
  // Two per app, taken in turn, are enough for the setups' relations, each
  // between options set up one after the other (a relation between two
  // returns of the same one throws: parsed again, with every option).
  std::array<CLI::Option*, 2> apps{};
  std::size_t count = 0;
  for (const Unbound& unbound : m_unbound) {
    if (unbound.app == &app && count < apps.size()) {
      apps[count++] = unbound.option.get();
    }
  }
  if (count < apps.size()) {
    m_unbound.push_back({&app, std::make_unique<UnboundOption>(app)});
    m_last_unbound = m_unbound.back().option.get();
  } else {
    m_last_unbound = apps[0] == m_last_unbound ? apps[1] : apps[0];
  }
  return m_last_unbound;
}

CLI::Option* add_table_option(CLI::App& app, std::string_view command, std::string_view name,
                              bool& target) {
  const OptionSpec& spec = option_spec(command, name);
  if (left_out(spec)) {
    return s_only_named->unbound(app);
  }
  return finish(app.add_flag(std::string(spec.names), target, std::string(spec.help)), spec);
}

CLI::Option* add_table_option(CLI::App& app, std::string_view command, std::string_view name,
                              std::string& target) {
  return add_valued(app, command, name, target);
}

CLI::Option* add_table_option(CLI::App& app, std::string_view command, std::string_view name,
                              double& target) {
  return add_valued(app, command, name, target);
}

CLI::Option* add_table_option(CLI::App& app, std::string_view command, std::string_view name,
                              std::int64_t& target) {
  return add_valued(app, command, name, target);
}

CLI::Option* add_table_option(CLI::App& app, std::string_view command, std::string_view name,
                              int& target) {
  return add_valued(app, command, name, target);
}

CLI::Option* add_table_option(CLI::App& app, std::string_view command, std::string_view name,
                              std::vector<std::string>& target) {
  return add_valued(app, command, name, target);
}

void apply_environment(CLI::App& app, std::string_view command) {
  for (const OptionSpec& spec : option_table()) {
    if (!spec.env.empty() && checked_from_environment(spec) && belongs_to(spec, command)) {
      apply_environment(app, spec);
    }
  }
}

void add_lock_options(CLI::App& sub, std::string_view command, LockArgs& args) {
  add_table_option(sub, command, "--ttl", args.ttl);
  auto* nonblock = add_table_option(sub, command, "--nonblock", args.nonblock);
  add_table_option(sub, command, "--wait", args.wait)->excludes(nonblock);
  // Bound nowhere: it is refused with advice (flock's --timeout is -w).
  static double refused_timeout = 0;
  add_table_option(sub, command, "--timeout", refused_timeout);
  add_table_option(sub, command, "--conflict-exit-code", args.conflict_exit);
  auto* shared = add_table_option(sub, command, "--shared", args.shared);
  add_table_option(sub, command, "--exclusive", args.exclusive)->excludes(shared);
  add_table_option(sub, command, "--clock", args.clock);
  add_table_option(sub, command, "--slots", args.slots);
  add_table_option(sub, command, "--syslog", args.syslog);
  add_table_option(sub, command, "--jitter", args.jitter);
  add_table_option(sub, command, "--max-waiters", args.max_waiters);
}

void add_global_options(CLI::App& app, GlobalOptions& g) {
  add_table_option(app, "", "--url", g.urls)
      ->allow_extra_args(false)  // one URL per -u: `-u URL KEY` must leave KEY alone
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  add_table_option(app, "", "--password-file", g.password_file);
  add_table_option(app, "", "--io-timeout", g.io_timeout);
  add_table_option(app, "", "--timeout", g.deprecated_timeout);  // deprecated: parse_command_line()
  add_table_option(app, "", "--prefix", g.prefix);
  add_table_option(app, "", "--json", g.json);
  add_table_option(app, "", "--json-fd", g.json_fd);
  auto* quiet = add_table_option(app, "", "--quiet", g.quiet);
  add_table_option(app, "", "--verbose", g.verbose)->excludes(quiet);
  add_table_option(app, "", "--cacert", g.cacert);
  add_table_option(app, "", "--cacertdir", g.cacertdir);
  auto* cert = add_table_option(app, "", "--cert", g.cert);
  auto* key = add_table_option(app, "", "--key", g.key);
  cert->needs(key);
  key->needs(cert);
  add_table_option(app, "", "--sni", g.sni);
  add_table_option(app, "", "--insecure", g.insecure);
  add_table_option(app, "", "--sentinel-password-file", g.sentinel_password_file);
  add_table_option(app, "", "--replicas", g.replicas);
}

}  // namespace nxlock::cli
