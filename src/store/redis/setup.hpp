// Setup: the round trip that readies each new connection (AUTH, SELECT, ROLE, SUBSCRIBE, checks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "store/redis/reply.hpp"

namespace nxlock::store::redis {

// Judges the reply to a setup check's command, an error reply included (an
// ACL may refuse INFO); throws to fail the connect.
using SetupCheck = std::function<void(const redisReply&)>;
using SetupChecks = std::vector<std::pair<std::vector<std::string>, SetupCheck>>;

// The setup's commands in the order they are sent, and where ROLE and the
// checks are among them.
struct SetupPipeline {
  std::vector<Command> commands;
  std::size_t role_index = SIZE_MAX;  // SIZE_MAX: ROLE is not asked
  std::size_t checks_from = 0;
};

// `setup` (AUTH, SELECT or SUBSCRIBE), ROLE when `check_role` (before
// SUBSCRIBE, after which a connection takes no commands), then the checks.
// The commands point into `setup` and `checks`, which must outlive them.
SetupPipeline setup_pipeline(const std::vector<std::vector<std::string>>& setup,
                             const SetupChecks& checks, bool check_role);

// Judges the pipeline's replies: an error reply to a setup command throws as
// throw_reply_error does, naming `name`; a check may throw. Returns ROLE's
// first word ("master", "slave", "sentinel"), "" if not asked or not understood.
std::string judge_setup(const SetupPipeline& pipeline, const std::vector<Reply>& replies,
                        const SetupChecks& checks, const std::string& name);

// The checks' commands, in order; they point into `checks`.
std::vector<Command> check_commands(const SetupChecks& checks);

// Runs each check on its reply: checks[i] on replies[i]. Throws as the check does.
void run_checks(const SetupChecks& checks, const std::vector<Reply>& replies);

// True when `commands` only read (TIME, GET): checks not run yet may ride
// along with them; a write must not reach a server the checks would refuse.
bool reads_only(const std::vector<Command>& commands);

}  // namespace nxlock::store::redis
