package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

var _ = Describe("Topic lifecycle", func() {
	It("creates a topic with the documented defaults and answers 201 with the Topic object", func() {
		name := uniqueTopic("create")
		r := raw(http.MethodPost, "/v1/topics", []byte(`{"name":"`+name+`"}`))
		Expect(r.Status).To(Equal(http.StatusCreated), "%s", r.Body)
		Expect(r.Header.Get("Content-Type")).To(HavePrefix("application/json"))
		t := createdTopic(r.Body)
		Expect(t.Name).To(Equal(name))
		Expect(t.Partitions).To(Equal(3))
		Expect(t.RetentionMs).To(Equal(int64(604_800_000)))
		Expect(t.VisibilityTimeoutMs).To(Equal(int64(30_000)))
		Expect(t.MaxInFlightPerPartition).To(Equal(int64(1024)))
		Expect(t.MaxAckedAheadPerPartition).To(Equal(int64(1024)))
		Expect(t.Role).To(Equal(client.RoleStandalone))
		Expect(t.Owner).To(BeEmpty(), "security is off: topics get no owner")
		Expect(t.CreatedAt).To(BeNumerically("~", time.Now().Unix(), 60), "created_at is Unix seconds")

		_, err := api.CreateTopic(ctx(5*time.Second), client.CreateTopicRequest{Name: name})
		Expect(statusOf(err)).To(Equal(http.StatusConflict), "a second create of the same name conflicts")
	})

	It("lists every topic in ascending name order across pages without repeats", func() {
		prefix := uniqueTopic("list")
		var mine []string
		for _, suffix := range []string{"e", "a", "d", "b", "c"} {
			createTopic(client.CreateTopicRequest{Name: prefix + "-" + suffix})
			mine = append(mine, prefix+"-"+suffix)
		}
		var all []string
		token := ""
		for pages := 0; ; pages++ {
			Expect(pages).To(BeNumerically("<", 10_000), "pagination does not terminate")
			page, next, err := api.ListTopics(ctx(5*time.Second), 2, token)
			Expect(err).NotTo(HaveOccurred())
			Expect(len(page)).To(BeNumerically("<=", 2), "a page never exceeds limit")
			for _, t := range page {
				all = append(all, t.Name)
			}
			if next == "" {
				break
			}
			Expect(next).NotTo(Equal(token), "the server must not repeat a page token")
			token = next
		}
		Expect(slices.IsSorted(all)).To(BeTrue(), "names ascend across pages: %v", all)
		Expect(slices.Compact(slices.Clone(all))).To(HaveLen(len(all)), "no topic appears twice")
		for _, n := range mine {
			Expect(all).To(ContainElement(n))
		}

		r := raw(http.MethodGet, "/v1/topics?limit=1000000", nil)
		Expect(r.Status).To(Equal(http.StatusOK), "limit above 1000 is capped, not refused")
	})

	It("describes per-partition stats with the owner node, sorted by index, and one entry with ?partition", func() {
		name := uniqueTopic("describe")
		createTopic(client.CreateTopicRequest{Name: name, Partitions: 4})
		for i := 0; i < 3; i++ {
			Expect(api.Produce(ctx(5*time.Second), name, []byte("x"), client.ProduceOptions{Partition: intp(2)})).To(Succeed())
		}
		waitVisible(name, 3)

		d, err := api.GetTopic(ctx(5*time.Second), name, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Name).To(Equal(name))
		Expect(d.Partitions).To(Equal(4))
		Expect(d.PartitionStats).To(HaveLen(4))
		for i, s := range d.PartitionStats {
			Expect(s.Index).To(Equal(i), "partition_stats sorted by index")
			Expect(s.OwnerNode).To(Equal("n1"), "owner_node is the node ID holding the data")
			Expect(s.Available).To(BeTrue())
			Expect(s.NextOffset).To(BeNumerically(">=", s.HighWatermark))
		}
		p2 := d.PartitionStats[2]
		Expect(p2.HighWatermark).To(Equal(int64(3)))
		Expect(p2.OldestOffset).To(Equal(int64(0)))
		Expect(p2.Segments).To(BeNumerically(">=", 1))
		Expect(p2.SizeBytes).To(BeNumerically(">", 0))

		one, err := api.GetTopic(ctx(5*time.Second), name, intp(2))
		Expect(err).NotTo(HaveOccurred())
		Expect(one.PartitionStats).To(HaveLen(1))
		Expect(one.PartitionStats[0].Index).To(Equal(2))
		Expect(one.PartitionStats[0].HighWatermark).To(Equal(int64(3)))
	})

	It("alters partitions, visibility and retention atomically and reports the topic after the change", func() {
		name := uniqueTopic("alter")
		createTopic(client.CreateTopicRequest{Name: name})
		t, err := api.AlterTopic(ctx(5*time.Second), name, client.AlterTopicRequest{
			Partitions: intp(5), VisibilityTimeoutMs: i64p(2500), RetentionMs: i64p(0),
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(t.Partitions).To(Equal(5))
		Expect(t.VisibilityTimeoutMs).To(Equal(int64(2500)))
		Expect(t.RetentionMs).To(Equal(int64(0)), "0 = keep forever")

		d, err := api.GetTopic(ctx(5*time.Second), name, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(d.PartitionStats).To(HaveLen(5), "new partitions exist after the increase")
		Expect(d.VisibilityTimeoutMs).To(Equal(int64(2500)))

		// One invalid field makes the whole request fail and nothing changes.
		_, err = api.AlterTopic(ctx(5*time.Second), name, client.AlterTopicRequest{
			VisibilityTimeoutMs: i64p(9999), Partitions: intp(4),
		})
		Expect(statusOf(err)).To(Equal(http.StatusBadRequest), "partitions may only grow")
		d, err = api.GetTopic(ctx(5*time.Second), name, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(d.VisibilityTimeoutMs).To(Equal(int64(2500)), "a refused alter applies no field")

		// Produce to a new partition works, and keys hash over the new count from now on.
		Expect(api.Produce(ctx(5*time.Second), name, []byte("new"), client.ProduceOptions{Partition: intp(4)})).To(Succeed())
		waitVisible(name, 1)
		var key string
		for i := 0; ; i++ {
			key = fmt.Sprintf("k%d", i)
			if fnvPartition(key, 5) >= 3 {
				break // a key that only the grown topic can route where it now belongs
			}
		}
		Expect(api.Produce(ctx(5*time.Second), name, []byte("keyed"), client.ProduceOptions{Key: key})).To(Succeed())
		waitVisible(name, 2)
		hw, err := harness.HighWatermarks(ctx(5*time.Second), api, name)
		Expect(err).NotTo(HaveOccurred())
		Expect(hw[fnvPartition(key, 5)]).To(BeNumerically(">=", 1), "key %q routes by FNV-1a mod 5 after the increase: %v", key, hw)

		_, err = api.AlterTopic(ctx(5*time.Second), uniqueTopic("absent"), client.AlterTopicRequest{Partitions: intp(6)})
		Expect(statusOf(err)).To(Equal(http.StatusNotFound))
	})

	It("deletes a topic with its data: describe 404, and a re-created topic of the same name is empty", func() {
		name := uniqueTopic("delete")
		createTopic(client.CreateTopicRequest{Name: name})
		payloads, err := harness.ProduceBatches(ctx(10*time.Second), api, name, "old", 30, 30)
		Expect(err).NotTo(HaveOccurred())
		Expect(payloads).To(HaveLen(30))
		waitVisible(name, 30)

		r := raw(http.MethodDelete, "/v1/topics/"+name, nil)
		Expect(r.Status).To(Equal(http.StatusNoContent))
		Expect(r.Body).To(BeEmpty())

		_, err = api.GetTopic(ctx(5*time.Second), name, nil)
		Expect(statusOf(err)).To(Equal(http.StatusNotFound))
		Expect(statusOf(api.Produce(ctx(5*time.Second), name, []byte("x"), client.ProduceOptions{}))).To(Equal(http.StatusNotFound))
		_, err = api.Consume(ctx(5*time.Second), name, client.ConsumeOptions{})
		Expect(statusOf(err)).To(Equal(http.StatusNotFound))
		Expect(statusOf(api.DeleteTopic(ctx(5*time.Second), name))).To(Equal(http.StatusNotFound))
		all, err := api.AllTopics(ctx(5 * time.Second))
		Expect(err).NotTo(HaveOccurred())
		for _, t := range all {
			Expect(t.Name).NotTo(Equal(name))
		}

		createTopic(client.CreateTopicRequest{Name: name})
		hw, err := harness.HighWatermarks(ctx(5*time.Second), api, name)
		Expect(err).NotTo(HaveOccurred())
		Expect(hw).To(Equal([]int64{0, 0, 0}), "the new incarnation starts empty")
		for p := 0; p < 3; p++ {
			msgs, err := api.Consume(ctx(5*time.Second), name, client.ConsumeOptions{Partition: intp(p), Offset: i64p(0)})
			Expect(err).NotTo(HaveOccurred())
			Expect(msgs).To(BeEmpty(), "no record of the deleted incarnation is readable")
		}
		expectNothing(name, 300*time.Millisecond)

		// Only new data shows up.
		Expect(api.Produce(ctx(5*time.Second), name, []byte("fresh"), client.ProduceOptions{})).To(Succeed())
		m := consumeOne(name, 5*time.Second)
		Expect(string(m.Payload)).To(Equal(`"fresh"`))
	})

	It("describes a topic re-created right after its delete as empty, every time", func() {
		name := uniqueTopic("recreate")
		for round := 0; round < 5; round++ {
			createTopic(client.CreateTopicRequest{Name: name})
			_, err := harness.ProduceBatches(ctx(10*time.Second), api, name, "gone", 30, 30)
			Expect(err).NotTo(HaveOccurred())
			waitVisible(name, 30)
			Expect(api.DeleteTopic(ctx(5*time.Second), name)).To(Succeed())
			createTopic(client.CreateTopicRequest{Name: name})
			d, err := api.GetTopic(ctx(5*time.Second), name, nil)
			Expect(err).NotTo(HaveOccurred())
			for _, s := range d.PartitionStats {
				Expect(s.HighWatermark).To(BeZero(), "round %d: partition %d reports the deleted incarnation's data: %+v", round, s.Index, s)
				Expect(s.NextOffset).To(BeZero(), "round %d: partition %d", round, s.Index)
			}
			Expect(api.DeleteTopic(ctx(5*time.Second), name)).To(Succeed())
		}
	})
})

// createdTopic decodes a Topic object (unknown fields allowed: §1.8 lets responses grow).
func createdTopic(b []byte) client.Topic {
	GinkgoHelper()
	var t client.Topic
	Expect(json.Unmarshal(b, &t)).To(Succeed())
	return t
}
