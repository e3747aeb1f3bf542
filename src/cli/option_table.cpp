// The option table: see option_table.hpp.
#include "cli/option_table.hpp"

#include <stdexcept>

#include "cli/option_bounds.hpp"
#include "lock/lease_lock.hpp"

namespace nxlock::cli {

namespace {

using K = ValueKind;

// The commands that take locks, and those that name one.
constexpr std::string_view k_locking = "lock run-locked";
constexpr std::string_view k_lock_commands = "lock run-locked unlock renew status";

constexpr OptionSpec k_options[] = {
    // Global options.
    {"", "-u,--url", K::text, "URL",
     "Backend: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], rediss://… (TLS), "
     "redis+sentinel://[[USER]:PASSWORD@]HOST[:PORT][,…]/MASTER[/DB], "
     "unix:///PATH[?db=N], file:///PATH (default: the embedded "
     "store) or etcd://[USER:PASSWORD@]HOST[:PORT][,…] (etcds://: TLS); repeated (or several "
     "in NXLOCK_URL), independent servers "
     "that lock by majority",
     "NXLOCK_URL"},
    {"", "--password-file", K::text, "FILE",
     "Read the Redis password from FILE (or set NXLOCK_PASSWORD / REDISCLI_AUTH)"},
    {"", "--io-timeout", K::seconds, "SECONDS",
     "The backend's connect and per-command timeout, seconds (not the wait for a lock: -w)", {},
     {}, k_min_timeout_seconds, k_max_duration_seconds, true},
    // The old name of --io-timeout, kept for one release (man page, GLOBAL OPTIONS).
    {"", "--timeout", K::seconds, "SECONDS", "Deprecated: the old name of --io-timeout", {}, {},
     k_min_timeout_seconds, k_max_duration_seconds, false, true},
    {"", "--prefix", K::text, "STRING", "Prepended to every key", "NXLOCK_PREFIX"},
    {"", "--json", K::flag, "", "Print one JSON object on stdout"},
    {"", "--json-fd", K::whole, "N",
     "Print the JSON object on descriptor N instead of stdout (implies --json)", {}, {}, 1,
     k_max_descriptor},
    {"", "-q,--quiet", K::flag, "", "Say less on stderr"},
    {"", "-v,--verbose", K::flag, "", "Trace each backend step on stderr"},
    {"", "--cacert", K::text, "FILE", "rediss://: verify the server with the CAs in FILE",
     "NXLOCK_CACERT"},
    {"", "--cacertdir", K::text, "DIR", "rediss://: verify the server with the CAs in DIR",
     "NXLOCK_CACERTDIR"},
    {"", "--cert", K::text, "FILE", "rediss://: present this client certificate", "NXLOCK_CERT"},
    {"", "--key", K::text, "FILE", "rediss://: the client certificate's private key",
     "NXLOCK_CERT_KEY"},
    {"", "--sni", K::text, "NAME", "rediss://: the server name to send and check instead of HOST"},
    {"", "--insecure", K::flag, "",
     "rediss://: do not verify the server's certificate or name (says so on stderr)"},
    {"", "--sentinel-password-file", K::text, "FILE",
     "redis+sentinel://: read the Sentinels' own password from FILE (or set "
     "NXLOCK_SENTINEL_PASSWORD)"},
    {"", "--replicas", K::whole, "N",
     "Redis: every lock write waits until N replicas have it (WAIT); else exit 69", {}, {}, 0,
     k_max_replicas},

    // lock and run-locked.
    {k_locking, "-t,--ttl", K::whole, "SECONDS",
     "Seconds the lock holds without renewal (default: NXLOCK_TTL, else 60)", "NXLOCK_TTL", {}, 1,
     static_cast<double>(k_max_ttl), true},
    {k_locking, "-n,--nonblock", K::flag, "", "Try once; do not wait"},
    {k_locking, "-w,--wait", K::seconds, "SECONDS",
     "Give up after SECONDS (fractions allowed; default: NXLOCK_WAIT, else forever)",
     "NXLOCK_WAIT", {}, 0, k_max_duration_seconds},
    // flock's --timeout is -w; ours was the backend's I/O timeout (man page, lock).
    {k_locking, "--timeout", K::refused, "SECONDS",
     "did you mean -w? (--timeout is not the wait for the lock; the backend's I/O timeout is "
     "--io-timeout, before the command)",
     {}, {}, 0, 0, false, true},
    {k_locking, "-E,--conflict-exit-code", K::whole, "N", "Exit status when the lock is busy", {},
     {}, 0, 255, true},
    {k_locking, "-s,--shared", K::flag, "",
     "Hold the lock shared, as flock -s: any number of shared holders, or one "
     "exclusive holder"},
    {k_locking, "-x,--exclusive", K::flag, "", "Hold the lock exclusive, as flock -x (the default)"},
    {k_locking, "--jitter", K::seconds, "SECONDS",
     "Wait a random 0..SECONDS before the first try, so that a fleet's same tick spreads "
     "out (-w counts from the first try)",
     {}, {}, 0, k_max_duration_seconds},
    {k_locking, "--max-waiters", K::whole, "N",
     "Do not wait if N or more live waiters are ahead in line: exit 75 at once (1: missed "
     "ticks fold into one catch-up run)",
     {}, {}, 1, k_max_waiters},
    // Every command that names a lock.
    {k_lock_commands, "--clock", K::choice, "TEXT",
     "Whose clock decides expiry: server (Redis TIME) or local (this host)", {}, "server local", 0,
     0, true},
    {k_lock_commands, "--slots", K::whole, "N",
     "A counting semaphore: at most N holders of KEY at once, each in a slot "
     "1..N (every user of KEY must give the same N)",
     {}, {}, 1, lock::k_max_slots},
    // The commands that take or release a lock: their events to the system log.
    {"lock run-locked unlock", "--syslog", K::flag, "",
     "Log each event (taken, busy, released; run-locked: lost, stopped, ended) to the system "
     "log, ident nxlock, never waiting on it",
     "NXLOCK_SYSLOG"},

    // run-locked.
    {"run-locked", "-c,--command", K::nonempty, "STRING",
     "Run STRING with /bin/sh -c, as flock -c (also after KEY: run-locked KEY -c STRING)"},
    {"run-locked", "--no-renew", K::flag, "", "Do not renew the lock while COMMAND runs"},
    {"run-locked", "--inherit-credentials", K::flag, "",
     "Leave NXLOCK_PASSWORD, REDISCLI_AUTH and a password in NXLOCK_URL in "
     "COMMAND's environment (removed by default)"},
    {"run-locked", "--on-lost", K::choice, "TEXT",
     "If the lock is lost: term (SIGTERM, then SIGKILL), kill, or ignore (warn)", {},
     "term kill ignore", 0, 0, true},
    {"run-locked", "--kill-after", K::seconds, "SECONDS",
     "Seconds between SIGTERM and SIGKILL when the lock is lost or --max-runtime comes", {}, {}, 0,
     k_max_duration_seconds, true},
    {"run-locked", "--hold", K::seconds, "SECONDS",
     "Keep the lock until SECONDS after it was taken, even if COMMAND ends sooner: "
     "the same crontab line on many hosts then runs once per tick (a bit longer "
     "than clock skew + cron's start jitter, shorter than the period)",
     {}, {}, 0, k_max_duration_seconds, true},
    {"run-locked", "--max-runtime", K::seconds, "SECONDS",
     "Stop COMMAND (SIGTERM, --kill-after, SIGKILL) SECONDS after it started, "
     "release the lock and exit 124; 0: no limit",
     {}, {}, 0, static_cast<double>(k_max_ttl)},
    {"run-locked", "--metrics-dir", K::nonempty, "DIR",
     "Write DIR/nxlock_KEY.prom for node_exporter's textfile collector", "NXLOCK_METRICS_DIR"},
    {"run-locked", "--ping", K::nonempty, "URL",
     "Ping a healthchecks.io-style checker: URL/start as COMMAND starts, URL or URL/STATUS "
     "after the release ({key}: KEY)",
     "NXLOCK_PING_URL"},
    {"run-locked", "--ping-file", K::nonempty, "FILE",
     "Read --ping's URL from FILE (its first line), kept out of ps"},
    {"run-locked", "--ping-cacert", K::nonempty, "FILE",
     "https:// pings: verify the checker with the CAs in FILE (default: the system's CAs)"},
    {"run-locked", "--ping-timeout", K::seconds, "SECONDS",
     "The most a ping may delay nxlock's exit, name resolution included", {}, {},
     k_min_timeout_seconds, 3600, true},
    {"run-locked", "--replace", K::flag, "",
     "Ask the run-locked holding KEY to stop its job (as on a lost lock; it exits 79), then "
     "take the lock once it is released: a stuck run gives way to this one"},
    {"run-locked", "--ping-on-busy", K::flag, "",
     "A run skipped because the lock is busy pings success (per-host checks)"},

    // unlock, renew, list.
    {"unlock", "-f,--force", K::flag, "", "Delete whatever the key holds (with --slots: every slot)"},
    {"renew", "-t,--ttl", K::whole, "SECONDS",
     "Seconds from now the lock holds (default: NXLOCK_TTL, else 60)", "NXLOCK_TTL", {}, 1,
     static_cast<double>(k_max_ttl), true},
    {"list", "--expired", K::flag, "", "Also list expired, abandoned locks"},
    {"list", "--waiters", K::flag, "", "Also show each waiter: pid, host, since when, and kind"},
};

}  // namespace

std::span<const OptionSpec> option_table() {
  return k_options;
}

bool belongs_to(const OptionSpec& spec, std::string_view command) {
  if (command.empty() || spec.commands.empty()) {
    return command.empty() && spec.commands.empty();
  }
  std::string_view rest = spec.commands;
  while (!rest.empty()) {
    const std::size_t space = rest.find(' ');
    if (rest.substr(0, space) == command) {
      return true;
    }
    rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
  }
  return false;
}

std::string_view long_name(const OptionSpec& spec) {
  const std::size_t comma = spec.names.rfind(',');
  return comma == std::string_view::npos ? spec.names : spec.names.substr(comma + 1);
}

const OptionSpec& option_spec(std::string_view command, std::string_view name) {
  // long_name(spec) == name, without finding the comma in every entry: each
  // option set up looks through the table (BENCHMARKS.md, "The guard against its floor").
  const auto named = [name](std::string_view names) {
    return names.ends_with(name) &&
           (names.size() == name.size() || names[names.size() - name.size() - 1] == ',');
  };
  const bool plain = name.find(',') == std::string_view::npos;
  for (const OptionSpec& spec : k_options) {
    if (plain && named(spec.names) && belongs_to(spec, command)) {
      return spec;
    }
  }
  throw std::logic_error("no option " + std::string(name) + " for '" + std::string(command) +
                         "' in the option table");
}

std::string dump_options() {
  std::string text;
  const auto line = [&text](std::string_view command, const OptionSpec& spec) {
    for (const std::string_view field : {command, spec.names, spec.type_name, spec.env}) {
      text.append(field).push_back('\t');
    }
    text.append(spec.choices).push_back('\t');
    text.append(spec.hidden ? "hidden" : "").push_back('\n');
  };
  for (const OptionSpec& spec : k_options) {
    if (spec.commands.empty()) {
      line("global", spec);
      continue;
    }
    std::string_view rest = spec.commands;
    while (!rest.empty()) {
      const std::size_t space = rest.find(' ');
      line(rest.substr(0, space), spec);
      rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
    }
  }
  return text;
}

}  // namespace nxlock::cli
