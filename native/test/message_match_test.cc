// MPI's matching of point-to-point messages (message_match.h): a message takes the first posted
// receive it matches, a receive the first unexpected message it matches, wildcards on source and
// tag, and the order of both queues.
#include "transport/message_match.h"

#include <gtest/gtest.h>

#include <string>

namespace topocoll::test {
namespace {

using Queues = MatchQueues<std::string, std::string>;

TEST(MessageMatch, WildcardsMatchAnySourceOrTag) {
  EXPECT_TRUE(Matches(kAnySource, kAnyTag, 3, 7));
  EXPECT_TRUE(Matches(3, kAnyTag, 3, 7));
  EXPECT_TRUE(Matches(kAnySource, 7, 3, 7));
  EXPECT_TRUE(Matches(3, 7, 3, 7));
  EXPECT_FALSE(Matches(2, kAnyTag, 3, 7));
  EXPECT_FALSE(Matches(kAnySource, 6, 3, 7));
  EXPECT_FALSE(Matches(3, 0, 3, 7));
}

TEST(MessageMatch, AMessageTakesTheFirstPostedReceiveItMatches) {
  Queues q;
  q.AddPosted(1, 5, "r1 from 1 tag 5");
  q.AddPosted(kAnySource, 5, "r2 any tag 5");
  q.AddPosted(2, kAnyTag, "r3 from 2 any tag");
  q.AddPosted(kAnySource, kAnyTag, "r4 any any");
  EXPECT_EQ(q.TakePosted(2, 5), "r2 any tag 5");  // r1 wants rank 1
  EXPECT_EQ(q.TakePosted(2, 5), "r3 from 2 any tag");
  EXPECT_EQ(q.TakePosted(1, 5), "r1 from 1 tag 5");
  EXPECT_EQ(q.TakePosted(0, 9), "r4 any any");
  EXPECT_EQ(q.TakePosted(0, 9), std::nullopt);
  EXPECT_TRUE(q.posted().empty());
}

TEST(MessageMatch, AReceiveTakesTheFirstUnexpectedMessageItMatchesInArrivalOrder) {
  Queues q;
  q.AddUnexpected(1, 5, "m1");
  q.AddUnexpected(2, 6, "m2");
  q.AddUnexpected(1, 6, "m3");
  q.AddUnexpected(1, 5, "m4");
  EXPECT_EQ(q.TakeUnexpected(1, 5), "m1");
  EXPECT_EQ(q.TakeUnexpected(1, kAnyTag), "m3");  // the first from rank 1 left: send order
  EXPECT_EQ(q.TakeUnexpected(kAnySource, 5), "m4");
  EXPECT_EQ(q.TakeUnexpected(2, 5), std::nullopt);
  EXPECT_EQ(q.TakeUnexpected(kAnySource, kAnyTag), "m2");
  EXPECT_TRUE(q.unexpected().empty());
}

TEST(MessageMatch, NonOvertakingForEveryMixOfWildcards) {
  // Messages from two sources interleaved; receives from a specific source and from any source
  // take each sender's messages in the order they were sent.
  for (int form = 0; form < 2; ++form) {
    Queues q;
    for (int i = 0; i < 6; ++i) q.AddUnexpected(i % 2, i % 3, std::to_string(i));
    int last[2] = {-1, -1};
    for (int i = 0; i < 6; ++i) {
      const int source = form == 1 ? kAnySource : i % 2;
      std::optional<std::string> m = q.TakeUnexpected(source, kAnyTag);
      ASSERT_TRUE(m.has_value());
      const int n = std::stoi(*m);
      EXPECT_GT(n, last[n % 2]) << "form " << form;
      last[n % 2] = n;
    }
  }
}

TEST(MessageMatch, DropRemovesOnlyWhatItIsAskedTo) {
  Queues q;
  q.AddPosted(1, 1, "a");
  q.AddPosted(2, 1, "b");
  q.AddPosted(1, 2, "c");
  q.DropPosted([](const Queues::Posted& p) { return p.source == 1; });
  ASSERT_EQ(q.posted().size(), 1u);
  EXPECT_EQ(q.posted().front().recv, "b");
  q.AddUnexpected(3, 0, "x");
  q.AddUnexpected(4, 0, "y");
  q.DropUnexpected([](const Queues::Unexpected& u) { return u.message == "x"; });
  ASSERT_EQ(q.unexpected().size(), 1u);
  EXPECT_EQ(q.unexpected().front().message, "y");
}

}  // namespace
}  // namespace topocoll::test
