// Cluster membership without etcd: node records, flags, and ClusterMember's
// rounds over a fake store (registration, republishing, lease loss, the
// store unreachable, leaving). tests/integration/test_cluster.py runs the
// same against a real etcd and real nodes.
#include <gtest/gtest.h>

#include "cluster/cluster_member.h"
#include "cluster/cluster_options.h"
#include "cluster/cluster_status.h"
#include "cluster/node_record.h"
#include "cluster/placement.h"
#include "cluster/prefix_mirror.h"
#include "testing/fake_clock.h"
#include "testing/fake_cluster_store.h"

namespace inferd::cluster {
namespace {

TEST(NodeRecordTest, RoundTrips) {
  NodeRecord r;
  r.id = "node-a";
  r.http_address = "10.0.0.1:8000";
  r.grpc_address = "10.0.0.1:8001";
  r.budget_bytes = 1 << 30;
  r.used_bytes = 12345;
  r.in_flight = 7;
  r.started_unix_ms = 1790000000000;
  r.models = {"a", "b"};
  auto back = ParseNodeRecord(EncodeNodeRecord(r));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->id, "node-a");
  EXPECT_EQ(back->http_address, "10.0.0.1:8000");
  EXPECT_EQ(back->grpc_address, "10.0.0.1:8001");
  EXPECT_EQ(back->budget_bytes, uint64_t{1} << 30);
  EXPECT_EQ(back->used_bytes, 12345u);
  EXPECT_EQ(back->in_flight, 7);
  EXPECT_EQ(back->started_unix_ms, 1790000000000);
  EXPECT_EQ(back->models, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(back->rates.empty());
  r.rates = {{"a", 120}, {"b", 0}};
  back = ParseNodeRecord(EncodeNodeRecord(r));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->rates, (std::map<std::string, uint64_t>{{"a", 120}, {"b", 0}}));
}

TEST(NodeRecordTest, RefusesMalformedRecords) {
  for (const char* bad :
       {"", "[]", "{", "{\"http\":\"h:1\"}", "{\"id\":\"a b\",\"http\":\"h:1\"}", "{\"id\":\"a\"}",
        "{\"id\":\"a\",\"http\":\"\"}", "{\"id\":\"a\",\"http\":\"h:1\",\"models\":[1]}",
        "{\"id\":\"a\",\"http\":\"h:1\",\"used_bytes\":-1}", "{\"id\":\"a\",\"http\":\"h:1\",\"models\":\"x\"}",
        "{\"id\":\"a\",\"http\":\"h:1\",\"rates\":[]}", "{\"id\":\"a\",\"http\":\"h:1\",\"rates\":{\"m\":-1}}",
        "{\"id\":\"a\",\"http\":\"h:1\",\"rates\":{\"m\":1.5}}", "{\"id\":\"a\",\"http\":\"h:1\",\"rates\":{\"\":1}}",
        "{\"id\":\"a\",\"http\":\"h:1\",\"rates\":{\"m\":1000000001}}"}) {
    auto r = ParseNodeRecord(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ClusterOptionsTest, ParsesEtcdUrls) {
  auto one = ParseClusterUrl("etcd://127.0.0.1:2379");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, (std::vector<std::string>{"127.0.0.1:2379"}));
  auto three = ParseClusterUrl("etcd://a:1,b:2,etcd://c:3/");
  ASSERT_TRUE(three.ok()) << three.status().message();
  EXPECT_EQ(*three, (std::vector<std::string>{"a:1", "b:2", "c:3"}));
  for (const char* bad : {"", "http://a:1", "etcd://", "etcd://a", "etcd://a:0", "etcd://a:99999", "etcd://a:1,",
                          "etcd://a:1/x", "etcd://:1", "etcd://a b:1"}) {
    EXPECT_FALSE(ParseClusterUrl(bad).ok()) << bad;
  }
}

ClusterOptions Options(const std::string& id) {
  ClusterOptions o;
  o.endpoints = {"127.0.0.1:2379"};
  o.node_id = id;
  o.http_address = "127.0.0.1:8000";
  return o;
}

TEST(ClusterOptionsTest, ChecksEveryOption) {
  EXPECT_TRUE(CheckClusterOptions(Options("n1")).ok());
  ClusterOptions o = Options("n/1");
  EXPECT_FALSE(CheckClusterOptions(o).ok());
  o = Options("n1");
  o.http_address = "nohostport";
  EXPECT_FALSE(CheckClusterOptions(o).ok());
  o = Options("n1");
  o.lease_ttl = std::chrono::seconds(1);
  EXPECT_FALSE(CheckClusterOptions(o).ok());
  o = Options("n1");
  o.refresh = std::chrono::milliseconds(2000);  // more than a third of 5 s
  EXPECT_FALSE(CheckClusterOptions(o).ok());
  o = Options("n1");
  o.name = "a/b";
  EXPECT_FALSE(CheckClusterOptions(o).ok());
}

struct Node {
  NodeRecord record;
  ClusterMember member;
  Node(const std::string& id, testing::FakeClusterStore* store, Clock* clock)
      : member(Options(id), store, clock, [this] { return record; }) {}
};

TEST(ClusterMemberTest, NodesSeeEachOtherAndTheirModels) {
  testing::FakeClusterStore store;
  testing::FakeClock clock;
  Node a("a", &store, &clock), b("b", &store, &clock);
  a.record.models = {"m2", "m1"};
  a.member.Step();
  b.member.Step();
  a.member.Step();
  auto view = a.member.View();
  ASSERT_EQ(view->nodes.size(), 2u);
  EXPECT_TRUE(view->store_reachable);
  EXPECT_TRUE(view->registered);
  EXPECT_EQ(view->nodes[0].id, "a");
  EXPECT_EQ(view->nodes[0].models, (std::vector<std::string>{"m1", "m2"}));
  EXPECT_EQ(view->nodes[1].id, "b");
  ASSERT_NE(view->Find("b"), nullptr);
  EXPECT_EQ(view->Find("c"), nullptr);
  // A changed record is republished; b sees it on its next round.
  a.record.models.push_back("m3");
  a.member.Step();
  b.member.Step();
  EXPECT_EQ(b.member.View()->Find("a")->models.size(), 3u);
  EXPECT_EQ(a.member.stats().registrations.load(), 1u);
}

TEST(ClusterMemberTest, AnExpiredLeaseIsRenewedAndTheRecordRewritten) {
  testing::FakeClusterStore store;
  testing::FakeClock clock;
  Node a("a", &store, &clock), b("b", &store, &clock);
  a.member.Step();
  b.member.Step();
  ASSERT_EQ(b.member.View()->nodes.size(), 2u);
  store.Wipe();  // etcd restarted without its data: every lease and record gone
  b.member.Step();
  EXPECT_EQ(b.member.View()->nodes.size(), 1u) << "b registered again, a not yet";
  a.member.Step();
  b.member.Step();
  EXPECT_EQ(b.member.View()->nodes.size(), 2u);
  EXPECT_EQ(a.member.stats().registrations.load(), 2u);
}

TEST(ClusterMemberTest, AnUnreachableStoreKeepsTheLastViewMarkedStale) {
  testing::FakeClusterStore store;
  testing::FakeClock clock;
  Node a("a", &store, &clock), b("b", &store, &clock);
  a.member.Step();
  b.member.Step();
  a.member.Step();
  store.SetReachable(false);
  a.member.Step();
  auto stale = a.member.View();
  EXPECT_FALSE(stale->store_reachable);
  EXPECT_EQ(stale->nodes.size(), 2u) << "the last view is kept";
  EXPECT_GT(a.member.stats().store_errors.load(), 0u);
  store.SetReachable(true);
  a.member.Step();
  EXPECT_TRUE(a.member.View()->store_reachable);
  EXPECT_EQ(a.member.stats().registrations.load(), 1u) << "the lease held: no re-registration";
}

TEST(ClusterMemberTest, LeavingRemovesTheNodeAtOnce) {
  testing::FakeClusterStore store;
  testing::FakeClock clock;
  Node a("a", &store, &clock), b("b", &store, &clock);
  a.member.Step();
  b.member.Step();
  ASSERT_EQ(b.member.View()->nodes.size(), 2u);
  a.member.Stop();
  b.member.Step();
  EXPECT_EQ(b.member.View()->nodes.size(), 1u);
}

TEST(ClusterMemberTest, AMalformedRecordIsSkippedAndReported) {
  testing::FakeClusterStore store;
  testing::FakeClock clock;
  Node a("a", &store, &clock);
  store.PutRaw("/inferd/default/nodes/x", "{not json");
  store.PutRaw("/inferd/default/nodes/y", R"({"id":"z","http":"h:1"})");  // id does not match the key
  a.member.Step();
  auto view = a.member.View();
  EXPECT_EQ(view->nodes.size(), 1u);
  EXPECT_EQ(view->unreadable.size(), 2u);
  const std::string json = ClusterStatusJson(*view, a.member.stats(), clock.Now());
  EXPECT_NE(json.find("\"unreadable_records\":[\"/inferd/default/nodes/x\""), std::string::npos) << json;
}

TEST(ClusterStatusTest, CountsCopiesPerModel) {
  testing::FakeClusterStore store;
  testing::FakeClock clock;
  Node a("a", &store, &clock), b("b", &store, &clock);
  a.record.models = {"m1", "m2"};
  b.record.models = {"m2"};
  a.member.Step();
  b.member.Step();
  a.member.Step();
  const std::string json = ClusterStatusJson(*a.member.View(), a.member.stats(), clock.Now());
  EXPECT_NE(json.find("\"models\":2,\"models_by_copies\":{\"1\":1,\"2\":1}"), std::string::npos) << json;
  EXPECT_NE(json.find("\"self\":\"a\""), std::string::npos) << json;
}

NodeRecord Rec(const std::string& id, std::vector<std::string> models, uint64_t budget = 0, uint64_t used = 0,
               int64_t in_flight = 0) {
  NodeRecord r;
  r.id = id;
  r.http_address = "127.0.0.1:1";
  r.models = std::move(models);
  r.budget_bytes = budget;
  r.used_bytes = used;
  r.in_flight = in_flight;
  return r;
}

ClusterView ViewOf(const std::string& self, std::vector<NodeRecord> nodes) {
  ClusterView v;
  v.self = self;
  v.nodes = std::move(nodes);
  v.store_reachable = v.registered = true;
  return v;
}

TEST(PlacementTest, RoundTripsAndRefusesMalformedPlacements) {
  Placement p;
  p.nodes = {"b", "a"};
  auto back = ParsePlacement(EncodePlacement(p));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->nodes, (std::vector<std::string>{"b", "a"})) << "the order is kept: the first is the home";
  EXPECT_TRUE(back->declined.empty());
  EXPECT_EQ(EncodePlacement(p), R"({"nodes":["b","a"]})");
  p.declined = {"c"};
  EXPECT_EQ(EncodePlacement(p), R"({"nodes":["b","a"],"declined":["c"]})");
  back = ParsePlacement(EncodePlacement(p));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->declined, (std::vector<std::string>{"c"}));
  p.released = {"d"};
  EXPECT_EQ(EncodePlacement(p), R"({"nodes":["b","a"],"declined":["c"],"released":["d"]})");
  back = ParsePlacement(EncodePlacement(p));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->released, (std::vector<std::string>{"d"}));
  EXPECT_TRUE(back->Released("d"));
  EXPECT_FALSE(back->Released("a"));
  for (const char* bad : {"", "{}", "{\"nodes\":3}", "{\"nodes\":[1]}", "{\"nodes\":[\"a\",\"a\"]}",
                          "{\"nodes\":[\"a b\"]}", "{\"nodes\":[],\"declined\":\"c\"}",
                          "{\"nodes\":[],\"declined\":[\"c\",\"c\"]}", "{\"nodes\":[],\"released\":[1]}"})
    EXPECT_FALSE(ParsePlacement(bad).ok()) << bad;
}

TEST(PlacementTest, ANewCopyGoesWhereTheMostRoomIsThenTheFewestModels) {
  // c has the most free bytes; without budgets, the fewest models win, then the fewest in flight, then the id.
  ClusterView v = ViewOf("a", {Rec("a", {"m"}, 100, 90), Rec("b", {}, 100, 50), Rec("c", {"x", "y"}, 1000, 100)});
  EXPECT_EQ(ChooseNode(v, {}, {}), "c");
  EXPECT_EQ(ChooseNode(v, {"c"}, {}), "b");
  EXPECT_EQ(ChooseNode(v, {"c"}, {"b"}), "a") << "a node marked down is no choice";
  EXPECT_EQ(ChooseNode(v, {"a", "b", "c"}, {}), "");
  ClusterView even = ViewOf("a", {Rec("a", {"m"}), Rec("b", {}, 0, 0, 3), Rec("c", {}, 0, 0, 1)});
  EXPECT_EQ(ChooseNode(even, {}, {}), "c");
}

TEST(PlacementTest, RequestsGoToHoldersThenPlacedNodesThenAreServedHere) {
  ClusterView v = ViewOf("a", {Rec("a", {}), Rec("b", {"m"}, 0, 0, 5), Rec("c", {"m"}, 0, 0, 1)});
  RoutePlan fwd = PlanRoute(v, "m", {});
  ASSERT_FALSE(fwd.local);
  ASSERT_EQ(fwd.targets.size(), 2u);
  EXPECT_EQ(fwd.targets[0]->id, "c") << "the holder with fewer requests in flight first";
  EXPECT_EQ(fwd.targets[1]->id, "b");
  RoutePlan around = PlanRoute(v, "m", {"c"});
  ASSERT_EQ(around.targets.size(), 1u);
  EXPECT_EQ(around.targets[0]->id, "b");
  // Placed on d (still loading it) and on a: a serves it.
  v.nodes.push_back(Rec("d", {}));
  v.placements["n"].nodes = {"d"};
  RoutePlan loading = PlanRoute(v, "n", {});
  ASSERT_EQ(loading.targets.size(), 1u);
  EXPECT_EQ(loading.targets[0]->id, "d");
  v.placements["n"].nodes = {"d", "a"};
  EXPECT_TRUE(PlanRoute(v, "n", {}).local);
  // c's copy of m is released (the rate fell): it still serves, after the placed copies, while it drains.
  v.placements["m"].nodes = {"b"};
  v.placements["m"].released = {"c"};
  RoutePlan drained = PlanRoute(v, "m", {});
  ASSERT_EQ(drained.targets.size(), 2u);
  EXPECT_EQ(drained.targets[0]->id, "b");
  EXPECT_EQ(drained.targets[1]->id, "c");
}

TEST(PlacementTest, AnUnplacedModelGetsAHomeByRoom) {
  ClusterView v = ViewOf("a", {Rec("a", {"x", "y"}), Rec("b", {"x"})});
  RoutePlan p = PlanRoute(v, "new", {});
  EXPECT_FALSE(p.local);
  ASSERT_EQ(p.targets.size(), 1u);
  EXPECT_EQ(p.targets[0]->id, "b");
  RoutePlan here = PlanRoute(v, "new", {"b"});
  EXPECT_TRUE(here.local) << "the only other node is down: served here";
  EXPECT_TRUE(here.targets.empty());
  // A placement whose nodes are all gone counts as none.
  v.placements["old"].nodes = {"gone"};
  RoutePlan old = PlanRoute(v, "old", {});
  ASSERT_EQ(old.targets.size(), 1u);
  EXPECT_EQ(old.targets[0]->id, "b");
}

}  // namespace
}  // namespace inferd::cluster

namespace inferd::cluster {
namespace {

// The store seam's transaction (placements are written in batches): all or nothing.
TEST(ClusterStoreTest, ApplyIfWritesEveryKeyOrNone) {
  testing::FakeClusterStore store;
  ASSERT_TRUE(store.Put("/p/a", "1", 0).ok());
  auto listed = store.List("/p/");
  ASSERT_TRUE(listed.ok());
  const int64_t a_rev = (*listed)[0].mod_revision;
  // One stale revision: nothing is written.
  auto stale = store.ApplyIf({{"/p/a", "2", a_rev + 100, false}, {"/p/b", "1", 0, false}});
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(*stale);
  EXPECT_EQ(store.List("/p/")->size(), 1u);
  // Every revision current (0: absent): all written, a removal included.
  auto applied = store.ApplyIf({{"/p/a", "", a_rev, true}, {"/p/b", "1", 0, false}, {"/p/c", "3", 0, false}});
  ASSERT_TRUE(applied.ok());
  EXPECT_TRUE(*applied);
  auto after = store.List("/p/");
  ASSERT_EQ(after->size(), 2u);
  EXPECT_EQ((*after)[0].key, "/p/b");
  EXPECT_EQ((*after)[1].value, "3");
  store.SetReachable(false);
  EXPECT_EQ(store.ApplyIf({{"/p/d", "4", 0, false}}).status().code(), StatusCode::kUnavailable);
}

TEST(PrefixMirrorTest, ReadsOnlyWhatChangedAndEverythingWhenAKeyWasDeleted) {
  testing::FakeClusterStore store;
  for (const char* k : {"/p/a", "/p/b", "/p/c"}) ASSERT_TRUE(store.Put(k, "1", 0).ok());
  ASSERT_TRUE(store.Put("/q/x", "1", 0).ok());  // outside the prefix
  PrefixMirror m("/p/");
  ASSERT_TRUE(m.Refresh(store, false).ok());
  EXPECT_EQ(m.keys().size(), 3u);
  EXPECT_EQ(m.full_reads(), 1u) << "the first read reads every key";
  // Nothing changed: nothing transferred.
  ASSERT_TRUE(m.Refresh(store, false).ok());
  EXPECT_EQ(m.keys_read(), 3u);
  // A changed key and a new one: only those two.
  ASSERT_TRUE(store.Put("/p/b", "2", 0).ok());
  ASSERT_TRUE(store.Put("/p/d", "1", 0).ok());
  ASSERT_TRUE(m.Refresh(store, false).ok());
  EXPECT_EQ(m.keys_read(), 5u);
  EXPECT_EQ(m.full_reads(), 1u);
  ASSERT_EQ(m.keys().size(), 4u);
  EXPECT_EQ(m.keys().at("/p/b").value, "2");
  // A deleted key does not show among the changes; the count does not add up, so every key is read again.
  store.Remove("/p/a");
  ASSERT_TRUE(m.Refresh(store, false).ok());
  EXPECT_EQ(m.full_reads(), 2u);
  EXPECT_EQ(m.keys().count("/p/a"), 0u);
  EXPECT_EQ(m.keys().size(), 3u);
  // Deleted and replaced by a new key in the same interval (the count alone would agree): still noticed.
  store.Remove("/p/c");
  ASSERT_TRUE(store.Put("/p/e", "1", 0).ok());
  ASSERT_TRUE(m.Refresh(store, false).ok());
  EXPECT_EQ(m.full_reads(), 3u);
  EXPECT_EQ(m.keys().count("/p/c"), 0u);
  EXPECT_EQ(m.keys().count("/p/e"), 1u);
  // Asked for: a full read.
  ASSERT_TRUE(m.Refresh(store, true).ok());
  EXPECT_EQ(m.full_reads(), 4u);
  EXPECT_TRUE(m.last_read_full());
}

TEST(PrefixMirrorTest, AStoreThatStartedAgainIsReadWhole) {
  testing::FakeClusterStore store;
  for (const char* k : {"/p/a", "/p/b", "/p/c", "/p/d"}) ASSERT_TRUE(store.Put(k, "old", 0).ok());
  PrefixMirror m("/p/");
  ASSERT_TRUE(m.Refresh(store, false).ok());
  // etcd restarted without its data, fewer writes since: the revision went back.
  store.Wipe();
  for (const char* k : {"/p/a", "/p/b", "/p/x"}) ASSERT_TRUE(store.Put(k, "new", 0).ok());
  ASSERT_TRUE(m.Refresh(store, false).ok());
  EXPECT_EQ(m.full_reads(), 2u);
  EXPECT_EQ(m.keys().count("/p/d"), 0u);
  EXPECT_EQ(m.keys().at("/p/a").value, "new");
  EXPECT_EQ(m.keys().size(), 3u);
  // An unreachable store: an error, the copy kept.
  store.SetReachable(false);
  EXPECT_EQ(m.Refresh(store, false).code(), StatusCode::kUnavailable);
  EXPECT_EQ(m.keys().size(), 3u);
}

TEST(ClusterMemberTest, PlacementsAreReadByTheirChanges) {
  testing::FakeClusterStore store;
  testing::FakeClock clock;
  Node a("a", &store, &clock);
  const std::string prefix = Options("a").PlacementPrefix();
  for (int i = 0; i < 50; ++i) {
    Placement p;
    p.nodes = {"a"};
    store.PutRaw(prefix + "m" + std::to_string(i), EncodePlacement(p));
  }
  a.member.Step();
  ASSERT_EQ(a.member.View()->placements.size(), 50u);
  const uint64_t first = a.member.stats().placement_keys_read.load();
  EXPECT_EQ(first, 50u);
  a.member.Step();
  a.member.Step();
  EXPECT_EQ(a.member.stats().placement_keys_read.load(), first) << "nothing changed: nothing read";
  // Another node moves m7 and removes m8: both seen on the next round.
  Placement moved;
  moved.nodes = {"b", "a"};
  store.PutRaw(prefix + "m7", EncodePlacement(moved));
  store.Remove(prefix + "m8");
  a.member.Step();
  auto view = a.member.View();
  EXPECT_EQ(view->placements.size(), 49u);
  EXPECT_EQ(view->placements.count("m8"), 0u);
  EXPECT_EQ(view->placements.at("m7").nodes, (std::vector<std::string>{"b", "a"}));
  EXPECT_EQ(view->placements.at("m1").nodes, (std::vector<std::string>{"a"}));
  EXPECT_EQ(a.member.stats().placement_full_reads.load(), 2u) << "the deletion made the second full read";
  // A round that failed: the next one reads every placement.
  store.SetReachable(false);
  a.member.Step();
  store.SetReachable(true);
  a.member.Step();
  EXPECT_EQ(a.member.stats().placement_full_reads.load(), 3u);
  EXPECT_EQ(a.member.View()->placements.size(), 49u);
  // etcd restarted without its data and written back up to the same revision with as many placements (the
  // changes alone would add up): the lost lease makes the member read them all.
  const int64_t revision_before = store.ListChanged(prefix, 0)->revision;
  store.Wipe();
  Placement other;
  other.nodes = {"c"};
  for (int i = 0; i < 49; ++i) store.PutRaw(prefix + "n" + std::to_string(i), EncodePlacement(other));
  while (store.ListChanged(prefix, 0)->revision < revision_before) store.PutRaw("/elsewhere", "x");
  a.member.Step();
  view = a.member.View();
  EXPECT_EQ(a.member.stats().registrations.load(), 2u);
  EXPECT_EQ(view->placements.count("m1"), 0u);
  ASSERT_EQ(view->placements.count("n1"), 1u);
  EXPECT_EQ(view->placements.at("n1").nodes, (std::vector<std::string>{"c"}));
}

}  // namespace
}  // namespace inferd::cluster
