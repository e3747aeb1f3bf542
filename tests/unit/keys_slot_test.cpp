// slot_of: the slots of a counting lock (--slots) read back from their lock keys.
#include <gtest/gtest.h>

#include <string>

#include "lock/keys.hpp"

namespace nxlock {
namespace {

std::string slot_key(const std::string& key, int index) {
  return lock::companion_key(key, "slot" + std::to_string(index));
}

TEST(SlotOf, ReadsBackEverySlotKeyCompanionKeyWrites) {
  for (const std::string key : {"backup", "{jobs}.backup", "a}b", "x:y", "{x}", "slot1:x", ""}) {
    for (const int index : {0, 1, 3, 10, 123456}) {
      const auto slot = lock::slot_of(slot_key(key, index));
      ASSERT_TRUE(slot.has_value()) << slot_key(key, index);
      EXPECT_EQ(slot->key, key);
      EXPECT_EQ(slot->index, index);
    }
  }
}

TEST(SlotOf, TheDocumentedForm) {
  EXPECT_EQ(slot_key("backup", 3), "{backup}:slot3:backup");
  const auto slot = lock::slot_of("{backup}:slot3:backup");
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->key, "backup");
  EXPECT_EQ(slot->index, 3);
}

TEST(SlotOf, RefusesWhatCompanionKeyNeverWrites) {
  for (const std::string name :
       {"backup", "{backup}:fence:backup", "{backup}:holder:backup", "{backup}:slot:backup",
        "{backup}:slot03:backup", "{backup}:slot-1:backup", "{backup}:slotx:backup", "{x}:slot1:y",
        "{backup}:slot3", "{backup}slot3:backup", "}slot1:plain", "{backup}:slot1234567890:backup",
        "slot1:backup"}) {
    EXPECT_FALSE(lock::slot_of(name).has_value()) << name;
  }
}

}  // namespace
}  // namespace nxlock
