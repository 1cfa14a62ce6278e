// Package refs is the fixture of hack/check-doc-refs.sh: one good reference, two bad ones.
package refs

// good cites docs/internals/page.md §1.2 and docs/internals/page.md#2-second.
const good = 1

// bad cites docs/internals/page.md §3, a section that does not exist.
const bad = 2

// old cites spec/storage.md §7, a document that is not in the repository.
const old = 3
