package auth_test

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
)

// auditRecords returns the node's audit records about target, in log order.
func auditRecords(target string) []map[string]any {
	GinkgoHelper()
	f, err := os.Open(node.LogPath)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "audit" && m["target"] == target {
			out = append(out, m)
		}
	}
	return out
}

var _ = Describe("Audit trail", func() {
	It("logs every user change with actor, target and outcome, and never a password", func() {
		name := unique("audited")
		const first, second = "audit-Secret-first", "audit-Secret-second"
		c := ctx(20 * time.Second)
		_, err := root.CreateUser(c, client.CreateUserRequest{Username: name, Password: first,
			Grants: []client.Grant{grant(client.ActionConsume, "x")}})
		Expect(err).NotTo(HaveOccurred())
		_, err = root.SetGrants(c, name, []client.Grant{grant(client.ActionProduce, "y")})
		Expect(err).NotTo(HaveOccurred())
		Expect(root.SetPassword(c, name, second, "")).To(Succeed())
		Expect(statusOf(as(name, second).DeleteUser(c, "admin"))).To(Equal(403))
		Expect(root.DeleteUser(c, name)).To(Succeed())

		want := []string{"user.create admin ok", "user.grants admin ok", "user.password admin ok", "user.delete admin ok"}
		var got []string
		Eventually(func() []string {
			got = got[:0]
			for _, r := range auditRecords(name) {
				got = append(got, strings.Join([]string{r["event"].(string), r["actor"].(string), r["outcome"].(string)}, " "))
				Expect(r["node"]).To(Equal("n1"))
			}
			return got
		}).WithTimeout(5 * time.Second).Should(Equal(want))
		denied := auditRecords("admin")
		Expect(denied).NotTo(BeEmpty())
		Expect(denied[len(denied)-1]).To(HaveKeyWithValue("event", "user.delete"))
		Expect(denied[len(denied)-1]).To(HaveKeyWithValue("actor", name))
		Expect(denied[len(denied)-1]).To(HaveKeyWithValue("outcome", "denied"))

		logText, err := os.ReadFile(node.LogPath)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(logText)).NotTo(ContainSubstring(first))
		Expect(string(logText)).NotTo(ContainSubstring(second))
		Expect(string(logText)).NotTo(ContainSubstring(rootPassword))
	})
})
