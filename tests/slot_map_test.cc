// SPDX-License-Identifier: Apache-2.0
// The cluster's slot map (common/cluster/slot_map.h) and addresses (cluster_address.h): the
// etcd encoding round-trips, every corruption or inconsistency is refused, slots spread keys
// evenly and independently of the table's bucket hash, and bad addresses name their fault.
#include "common/cluster/slot_map.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/cluster/cluster_address.h"
#include "common/table/layout.h"

namespace rkv::cluster {
namespace {

SlotMap Sample(uint32_t slots = 64, uint16_t replicas = 2) {
  SlotMap m;
  EXPECT_TRUE(SlotMap::Create(slots, replicas, 0x1234abcd, &m).ok());
  const uint16_t a = m.AddServer({7, "10.0.0.1", 7480});
  const uint16_t b = m.AddServer({9, "kv-b.example", 7481});
  const uint16_t c = m.AddServer({11, "[fd00::3]", 7482});
  EXPECT_NE(c, kUnassigned);
  for (uint32_t s = 0; s < slots; ++s) {
    EXPECT_TRUE(m.Assign(s, 0, s % 2 ? a : b));
    if (replicas > 1) {
      EXPECT_TRUE(m.Assign(s, 1, c));
    }
  }
  m.set_epoch(42);
  return m;
}

TEST(SlotMap, EncodingRoundTrips) {
  SlotMap m = Sample();
  std::string bytes;
  m.Encode(&bytes);
  EXPECT_EQ(bytes.size(), 48u + 3 * 72 + 64 * 2 * 2);
  SlotMap d;
  ASSERT_TRUE(SlotMap::Decode(bytes, &d).ok());
  EXPECT_EQ(d.epoch(), 42u);
  EXPECT_EQ(d.num_slots(), 64u);
  EXPECT_EQ(d.replicas(), 2);
  EXPECT_EQ(d.slot_seed(), 0x1234abcdu);
  EXPECT_EQ(d.servers(), m.servers());
  for (uint32_t s = 0; s < 64; ++s)
    for (uint16_t r = 0; r < 2; ++r) EXPECT_EQ(d.OwnerIndex(s, r), m.OwnerIndex(s, r));
  EXPECT_EQ(d.SlotsOwnedBy(d.IndexOf(7)), 32u);
  std::string again;
  d.Encode(&again);
  EXPECT_EQ(again, bytes);
}

// Any single flipped byte, any truncation or extension is refused (checksum, counts, magic).
TEST(SlotMap, EveryCorruptionIsRefused) {
  std::string bytes;
  Sample().Encode(&bytes);
  SlotMap d;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = char(bad[i] ^ 0x40);
    EXPECT_FALSE(SlotMap::Decode(bad, &d).ok()) << "byte " << i;
  }
  for (size_t n : {size_t(0), size_t(47), bytes.size() - 1})
    EXPECT_FALSE(SlotMap::Decode(bytes.substr(0, n), &d).ok()) << n;
  EXPECT_FALSE(SlotMap::Decode(bytes + "x", &d).ok());
}

// Maps the format cannot hold are never built.
TEST(SlotMap, InconsistentMapsCannotBeBuilt) {
  SlotMap m = Sample(8, 2);
  EXPECT_FALSE(m.Assign(3, 1, m.OwnerIndex(3, 0))) << "one server twice for a slot";
  // Owners beyond the server table, and bad entries, cannot even be built.
  EXPECT_FALSE(m.Assign(0, 0, 3));
  EXPECT_FALSE(m.Assign(8, 0, 0));
  EXPECT_FALSE(m.Assign(0, 2, 0));
  EXPECT_EQ(m.AddServer({12, "", 1}), kUnassigned);
  EXPECT_EQ(m.AddServer({12, std::string(65, 'h'), 1}), kUnassigned);
  EXPECT_EQ(m.AddServer({12, "bad host", 1}), kUnassigned);
  EXPECT_EQ(m.AddServer({12, "h", 0}), kUnassigned);
  EXPECT_EQ(m.AddServer({7, "10.0.0.2", 7480}), kUnassigned) << "same id, another address";
  EXPECT_EQ(m.AddServer({7, "10.0.0.1", 7480}), 0) << "the same entry again";
  SlotMap x;
  EXPECT_FALSE(SlotMap::Create(0, 1, 0, &x).ok());
  EXPECT_FALSE(SlotMap::Create(100, 1, 0, &x).ok());
  EXPECT_FALSE(SlotMap::Create(kMaxSlots * 2, 1, 0, &x).ok());
  EXPECT_FALSE(SlotMap::Create(16, 4, 0, &x).ok());
  EXPECT_FALSE(SlotMap::Create(16, 0, 0, &x).ok());
}

// A map with a valid checksum but one server twice for a slot (a buggy or hostile writer):
// Decode refuses it.
TEST(SlotMap, OneServerTwiceForASlotIsRefusedEvenWithAGoodChecksum) {
  std::string bytes;
  Sample(8, 2).Encode(&bytes);
  const size_t owners = 48 + 3 * 72, r0 = owners + (3 * 2 + 0) * 2, r1 = owners + (3 * 2 + 1) * 2;
  bytes[r1] = bytes[r0];
  bytes[r1 + 1] = bytes[r0 + 1];
  bytes.replace(8, 8, 8, '\0');
  const uint64_t sum = XXH3_64bits(bytes.data(), bytes.size());
  for (int i = 0; i < 8; ++i) bytes[size_t(8 + i)] = char((sum >> (8 * i)) & 0xff);
  SlotMap d;
  Status s = SlotMap::Decode(bytes, &d);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("twice"), std::string::npos) << s.ToString();
}

TEST(SlotMap, SlotsSpreadKeysEvenlyAndIndependentlyOfBuckets) {
  constexpr uint32_t kSlots = 16;
  constexpr uint32_t kBuckets = 16;
  std::vector<int> per_slot(kSlots);
  std::map<std::pair<uint32_t, uint32_t>, int> joint;
  constexpr int kKeys = 64000;
  for (int i = 0; i < kKeys; ++i) {
    const std::string key = "user" + std::to_string(i);
    const uint32_t slot = SlotMap::SlotOf(key, 99, kSlots);
    ASSERT_LT(slot, kSlots);
    ++per_slot[slot];
    // The table hashes with its own seed; the same seed value must not tie them together.
    const uint32_t bucket = layout::HashKey(key, 99, kBuckets).bucket[0];
    ++joint[{slot, bucket}];
  }
  for (int n : per_slot) {
    EXPECT_GT(n, kKeys / int(kSlots) * 8 / 10);
    EXPECT_LT(n, kKeys / int(kSlots) * 12 / 10);
  }
  // Every (slot, bucket) pair occurs about equally often: a slot's keys fill every bucket.
  const int expect = kKeys / int(kSlots * kBuckets);
  for (const auto& [pair, n] : joint) {
    EXPECT_GT(n, expect / 2) << pair.first << "," << pair.second;
    EXPECT_LT(n, expect * 2) << pair.first << "," << pair.second;
  }
  EXPECT_EQ(joint.size(), size_t(kSlots * kBuckets));
  EXPECT_EQ(SlotMap::SlotOf("anything", 1, 1), 0u);
}

TEST(ClusterAddress, ParsesEndpointsAndName) {
  ClusterAddress a;
  ASSERT_TRUE(ParseClusterAddress("etcd://10.0.0.1:2379,etcd-b:2379,[::1]:2380/prod-1", &a).ok());
  EXPECT_EQ(a.endpoints, (std::vector<std::string>{"http://10.0.0.1:2379", "http://etcd-b:2379",
                                                   "http://[::1]:2380"}));
  EXPECT_EQ(a.name, "prod-1");
  EXPECT_EQ(a.Prefix(), "/rkv/cluster/prod-1/");
  ASSERT_TRUE(ParseClusterAddress("etcds://h:1/x", &a).ok());
  EXPECT_EQ(a.endpoints[0], "https://h:1");
  EXPECT_TRUE(IsClusterAddress("etcd://h:1/x"));
  EXPECT_FALSE(IsClusterAddress("10.0.0.1:7480"));
}

TEST(ClusterAddress, BadAddressesSayWhatIsWrong) {
  ClusterAddress a;
  struct Case {
    const char* address;
    const char* says;
  } cases[] = {
      {"http://h:1/x", "not etcd://"},
      {"etcd://h:1", "no /NAME"},
      {"etcd://h:1/", "1..64"},
      {"etcd://h:1/a/b", "NAME may hold"},
      {"etcd://h:1/a b", "NAME may hold"},
      {"etcd://h/x", "no :PORT"},
      {"etcd://h:0/x", "bad port"},
      {"etcd://h:65536/x", "bad port"},
      {"etcd://h:12a/x", "bad port"},
      {"etcd://h:1,,h:2/x", "empty HOST:PORT"},
      {"etcd://h:1,/x", "empty HOST:PORT"},
      {"etcd://us@er:1/x", "bad host"},
      {"etcd://[::1/x", "not [IPV6]:PORT"},
      {"etcd://[::g]:1/x", "bad IPv6"},
  };
  for (const Case& c : cases) {
    Status s = ParseClusterAddress(c.address, &a);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << c.address;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << c.address << ": " << s.ToString();
  }
  std::string many = "etcd://";
  for (int i = 0; i < 17; ++i) many += (i ? ",h:" : "h:") + std::to_string(i + 1);
  EXPECT_FALSE(ParseClusterAddress(many + "/x", &a).ok());
}

}  // namespace
}  // namespace rkv::cluster
