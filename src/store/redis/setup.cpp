// Setup: the setup pipeline of a connection, and what its replies say about the server.
#include "store/redis/setup.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>

namespace nxlock::store::redis {

namespace {

Command command_of(const std::vector<std::string>& args) {
  Command command;
  command.args.assign(args.begin(), args.end());
  return command;
}

}  // namespace

SetupPipeline setup_pipeline(const std::vector<std::vector<std::string>>& setup,
                             const SetupChecks& checks, bool check_role) {
  // AUTH, SELECT (or SUBSCRIBE), ROLE in one round trip: start-up time is most
  // of what an nxlock invocation costs.
  SetupPipeline pipeline;
  for (const auto& args : setup) {
    if (check_role && pipeline.role_index == SIZE_MAX && !args.empty() &&
        args.front() == "SUBSCRIBE") {
      pipeline.role_index = pipeline.commands.size();
      pipeline.commands.push_back({{"ROLE"}, {}});
    }
    pipeline.commands.push_back(command_of(args));
  }
  if (check_role && pipeline.role_index == SIZE_MAX) {
    pipeline.role_index = pipeline.commands.size();
    pipeline.commands.push_back({{"ROLE"}, {}});
  }
  pipeline.checks_from = pipeline.commands.size();
  for (const auto& [args, check] : checks) {
    pipeline.commands.push_back(command_of(args));
  }
  return pipeline;
}

std::string judge_setup(const SetupPipeline& pipeline, const std::vector<Reply>& replies,
                        const SetupChecks& checks, const std::string& name) {
  for (std::size_t i = 0; i < pipeline.checks_from; ++i) {
    if (replies[i]->type == REDIS_REPLY_ERROR) {
      throw_reply_error(*replies[i], pipeline.commands[i], name);
    }
  }
  for (std::size_t i = pipeline.checks_from; i < replies.size(); ++i) {
    checks[i - pipeline.checks_from].second(*replies[i]);
  }
  if (pipeline.role_index == SIZE_MAX) {
    return "";
  }
  // ROLE answers an array whose first element is "master", "slave" or "sentinel".
  const redisReply& role = *replies[pipeline.role_index];
  if (role.type == REDIS_REPLY_ARRAY && role.elements > 0 &&
      role.element[0]->type == REDIS_REPLY_STRING) {
    return std::string(role.element[0]->str, role.element[0]->len);
  }
  return "";
}

std::vector<Command> check_commands(const SetupChecks& checks) {
  std::vector<Command> commands;
  for (const auto& [args, check] : checks) {
    commands.push_back(command_of(args));
  }
  return commands;
}

void run_checks(const SetupChecks& checks, const std::vector<Reply>& replies) {
  for (std::size_t i = 0; i < checks.size(); ++i) {
    checks[i].second(*replies[i]);
  }
}

bool reads_only(const std::vector<Command>& commands) {
  return std::all_of(commands.begin(), commands.end(), [](const Command& c) {
    return !c.args.empty() && (c.args.front() == "TIME" || c.args.front() == "GET");
  });
}

}  // namespace nxlock::store::redis
