// The busy message's words for a lock that leased holders hold (acquire.hpp).
#include <string>
#include <string_view>

#include "cli/acquire.hpp"
#include "cli/context.hpp"

namespace nxlock::cli {

std::string busy_shared_holders(Context& ctx, lock::Lockable& lock) {
  constexpr std::size_t k_named = 3;
  const lock::Status status = lock.status();
  if (status.shared.empty()) {
    return {};
  }
  const bool slots = std::string_view(lock::lease_kind(status.shared)) == "slots";
  std::string text = " by " + std::to_string(status.shared.size()) +
                     (slots ? " slot holder" : " shared holder") +
                     (status.shared.size() == 1 ? "" : "s");
  nlohmann::json shared = nlohmann::json::array();
  for (std::size_t i = 0; i < status.shared.size(); ++i) {
    const lock::SharedHolderView view = lock::view_shared_holder(status.shared[i]);
    if (i < k_named) {
      text += (i == 0 ? ": " : ", ") + (view.holder ? holder_text(*view.holder) : view.value);
    }
    shared.push_back({{"value", view.value},
                      {"expires_at", view.expires_at},
                      {"holder", view.holder ? holder_json(*view.holder) : nlohmann::json()}});
  }
  if (status.shared.size() > k_named) {
    text += " and " + std::to_string(status.shared.size() - k_named) + " more";
  }
  ctx.out.field("kind", lock::lease_kind(status.shared));
  ctx.out.field("shared", std::move(shared));
  return text;
}

}  // namespace nxlock::cli
