// setnx, get, getset, del: one Store call each, with the Redis commands' semantics.
#include <memory>
#include <string>
#include <vector>

#include "cli/command_args.hpp"
#include "cli/exit_status.hpp"

namespace nxlock::cli {

Runner setnx_runner(std::shared_ptr<KeyValueArgs> args) {
  return [args](Context& ctx) {
    const auto key = ctx.key(args->key);
    const bool set =
        ctx.store().set_if_absent(key, args->value, std::nullopt, store::k_plain_step).set;
    ctx.out.line(set ? "1" : "0");
    ctx.out.bytes_field("key", key);
    ctx.out.field("set", set);
    return set ? k_exit_ok : k_exit_no;
  };
}

Runner get_runner(std::shared_ptr<KeyValueArgs> args) {
  return [args](Context& ctx) {
    const auto key = ctx.key(args->key);
    const auto value = ctx.store().get(key);
    ctx.out.bytes_field("key", key);
    ctx.out.field("found", value.has_value());
    if (!value) {
      return k_exit_no;
    }
    ctx.out.line(*value);
    ctx.out.bytes_field("value", *value);
    return k_exit_ok;
  };
}

Runner getset_runner(std::shared_ptr<KeyValueArgs> args) {
  return [args](Context& ctx) {
    const auto key = ctx.key(args->key);
    const auto old =
        ctx.store().get_and_set(key, args->value, std::nullopt, store::k_plain_step).old;
    ctx.out.bytes_field("key", key);
    ctx.out.field("found", old.has_value());
    if (!old) {
      return k_exit_no;
    }
    ctx.out.line(*old);
    ctx.out.bytes_field("old_value", *old);
    return k_exit_ok;
  };
}

Runner del_runner(std::shared_ptr<std::vector<std::string>> keys) {
  return [keys](Context& ctx) {
    std::vector<std::string> full;
    full.reserve(keys->size());
    for (const auto& key : *keys) {
      full.push_back(ctx.key(key));
    }
    const std::size_t removed = ctx.store().del(full);
    ctx.out.line(std::to_string(removed));
    ctx.out.field("removed", removed);
    return removed > 0 ? k_exit_ok : k_exit_no;
  };
}

}  // namespace nxlock::cli
