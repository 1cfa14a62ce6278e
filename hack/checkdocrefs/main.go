// Command checkdocrefs fails when a documentation reference points nowhere, or when a code
// comment still cites the design notes that are not in the repository.
//
// It reads, under -root (default "."):
//   - the comments of every *.go file under api/, broker/, operator/, test/ and hack/;
//   - the Makefile and every other file directly under hack/ (shell scripts, notes);
//   - every *.md file under docs/, and README.md and CONTRIBUTING.md at the root.
//
// testdata directories and the tools that name the forbidden forms (this program, its wrapper
// and hack/cite-rewrite.py) are skipped.
//
// and checks:
//   - every `docs/<path>.md` reference names an existing file; one followed by `§N` (or a list
//     `§N, §M`, `§N and §M`, `§N–§M`) needs a heading numbered N in that file (`## 3. Leases`,
//     `### 5.4 Freeze`); one followed by `#anchor` needs a heading with that GitHub anchor;
//   - in docs/*.md, every relative Markdown link `(path.md#anchor)` the same way;
//   - no comment, Makefile line or hack/ script cites `spec/…`, `spec §`, `seeds/`, a seed
//     (`seed 004`) or `../shared`, or carries an "issue N" note.
//
// Every finding is printed as `file:line: reference: reason`; the exit status is 1 if there is
// any. Run by hack/check-doc-refs.sh (make lint), which also runs it against the fixture in
// hack/testdata/docrefs as a self-test.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// codeDirs are the directories whose Go comments are checked.
var codeDirs = []string{"api", "broker", "operator", "test", "hack"}

// tools are the files that name the forbidden citations in order to find or rewrite them.
var tools = map[string]bool{
	"hack/check-doc-refs.sh":    true,
	"hack/cite-rewrite.py":      true,
	"hack/checkdocrefs/main.go": true,
}

var (
	// docRef is a repository-relative reference to a documentation page.
	docRef = regexp.MustCompile(`docs/[A-Za-z0-9_./-]+\.md(#[A-Za-z0-9_-]+)?`)
	// firstSection is the `§N` right after a reference.
	firstSection = regexp.MustCompile(`^\s*§\s*(\d+(?:\.\d+)*)`)
	// moreSection continues a list of sections of the same page.
	moreSection = regexp.MustCompile(`^\.?\s*(?:,|and|or|–|-|/)\s*§\s*(\d+(?:\.\d+)*)`)
	// mdLink is a Markdown link target.
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// numbered is a heading that starts with a section number.
	numbered = regexp.MustCompile(`^#{1,6}\s+(\d+(?:\.\d+)*)\.?(?:\s|$)`)
	heading  = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	// forbidden are citations of documents that are not in the repository.
	forbidden = []*regexp.Regexp{
		regexp.MustCompile(`\bspec/[A-Za-z0-9_-]+\.md`),
		regexp.MustCompile(`\bspec\s+§`),
		regexp.MustCompile(`\bseeds/`),
		regexp.MustCompile(`\[seed\s+\d+`),
		regexp.MustCompile(`\bseed\s+0\d\d\b`),
		regexp.MustCompile(`\.\./shared\b`),
		regexp.MustCompile(`(?i)\bissues?\s+#?\d+\b`),
	}
)

// finding is one broken reference.
type finding struct {
	file string
	line int
	ref  string
	why  string
}

// page is what a documentation file offers to references.
type page struct {
	sections map[string]bool
	anchors  map[string]bool
}

type checker struct {
	root     string
	pages    map[string]*page // by slash path relative to root; nil = missing
	findings []finding
}

func main() {
	root := flag.String("root", ".", "repository root")
	flag.Parse()
	c := &checker{root: *root, pages: map[string]*page{}}
	if err := c.run(); err != nil {
		fmt.Fprintln(os.Stderr, "checkdocrefs:", err)
		os.Exit(2)
	}
	sort.Slice(c.findings, func(i, j int) bool {
		a, b := c.findings[i], c.findings[j]
		if a.file != b.file {
			return a.file < b.file
		}
		return a.line < b.line
	})
	for _, f := range c.findings {
		fmt.Printf("%s:%d: %s: %s\n", f.file, f.line, f.ref, f.why)
	}
	if len(c.findings) > 0 {
		fmt.Printf("checkdocrefs: %d broken documentation reference(s)\n", len(c.findings))
		os.Exit(1)
	}
}

func (c *checker) run() error {
	for _, d := range codeDirs {
		err := c.walk(d, func(rel string) error {
			switch {
			case strings.HasSuffix(rel, ".go"):
				return c.checkGo(rel)
			case filepath.Dir(rel) == "hack":
				return c.checkText(rel, true)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(c.root, "Makefile")); err == nil {
		if err := c.checkText("Makefile", true); err != nil {
			return err
		}
	}
	for _, name := range []string{"README.md", "CONTRIBUTING.md"} {
		if _, err := os.Stat(filepath.Join(c.root, name)); err == nil {
			if err := c.checkMarkdown(name); err != nil {
				return err
			}
		}
	}
	return c.walk("docs", func(rel string) error {
		if strings.HasSuffix(rel, ".md") {
			return c.checkMarkdown(rel)
		}
		return nil
	})
}

// walk calls fn with the root-relative slash path of every regular file under dir, skipping
// testdata directories (fixtures hold broken references on purpose) and hidden directories.
func (c *checker) walk(dir string, fn func(rel string) error) error {
	base := filepath.Join(c.root, dir)
	if _, err := os.Stat(base); err != nil {
		return nil
	}
	return filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != base && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(c.root, p)
		if err != nil {
			return err
		}
		if rel = filepath.ToSlash(rel); tools[rel] {
			return nil
		}
		return fn(rel)
	})
}

// checkGo checks the comments of one Go file.
func (c *checker) checkGo(rel string) error {
	src, err := os.ReadFile(filepath.Join(c.root, rel))
	if err != nil {
		return err
	}
	fset := token.NewFileSet()
	file := fset.AddFile(rel, -1, len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, scanner.ScanComments)
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return nil
		}
		if tok != token.COMMENT {
			continue
		}
		first := fset.Position(pos).Line
		for i, line := range strings.Split(lit, "\n") {
			c.checkLine(rel, first+i, line, true)
		}
	}
}

// checkText checks every line of a script or Makefile.
func (c *checker) checkText(rel string, forbid bool) error {
	return c.eachLine(rel, func(n int, line string) {
		c.checkLine(rel, n, line, forbid)
	})
}

// checkMarkdown checks a documentation page: repository references and relative links.
func (c *checker) checkMarkdown(rel string) error {
	inFence := false
	return c.eachLine(rel, func(n int, line string) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
		}
		c.checkLine(rel, n, line, false)
		if inFence {
			return
		}
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			if path == "" {
				path = rel
			} else {
				path = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(rel), path)))
			}
			if !strings.HasSuffix(path, ".md") && anchor == "" {
				if _, err := os.Stat(filepath.Join(c.root, path)); err != nil {
					c.add(rel, n, target, "no such file")
				}
				continue
			}
			if !strings.HasSuffix(path, ".md") {
				continue
			}
			c.checkPage(rel, n, target, path, anchor, nil)
		}
	})
}

// checkLine checks the repository references on one line and, if forbid, the citations that
// must not appear.
func (c *checker) checkLine(rel string, n int, line string, forbid bool) {
	if forbid {
		for _, re := range forbidden {
			if m := re.FindString(line); m != "" {
				c.add(rel, n, m, "cites a document that is not in the repository, or an issue number: cite docs/ instead")
			}
		}
	}
	for _, loc := range docRef.FindAllStringIndex(line, -1) {
		if loc[0] > 0 && isPathByte(line[loc[0]-1]) {
			continue // part of a longer path, e.g. operator/docs/x.md
		}
		ref := line[loc[0]:loc[1]]
		path, anchor, _ := strings.Cut(ref, "#")
		rest := line[loc[1]:]
		var secs []string
		if m := firstSection.FindStringSubmatchIndex(rest); m != nil {
			secs = append(secs, rest[m[2]:m[3]])
			rest = rest[m[1]:]
			for {
				m := moreSection.FindStringSubmatchIndex(rest)
				if m == nil {
					break
				}
				secs = append(secs, rest[m[2]:m[3]])
				rest = rest[m[1]:]
			}
		}
		c.checkPage(rel, n, ref, path, anchor, secs)
	}
}

func isPathByte(b byte) bool {
	return b == '/' || b == '.' || b == '-' || b == '_' || unicode.IsLetter(rune(b)) || unicode.IsDigit(rune(b))
}

// checkPage records a finding unless path exists and has the anchor and every section.
func (c *checker) checkPage(rel string, n int, ref, path, anchor string, secs []string) {
	p, err := c.page(path)
	if err != nil || p == nil {
		c.add(rel, n, ref, "no such file")
		return
	}
	if anchor != "" && !p.anchors[strings.ToLower(anchor)] {
		c.add(rel, n, ref, "no heading with anchor #"+anchor+" in "+path)
	}
	for _, s := range secs {
		s = strings.TrimSuffix(s, ".")
		if !p.sections[s] {
			c.add(rel, n, ref+" §"+s, "no section "+s+" in "+path)
		}
	}
}

// page loads (once) the headings of a documentation file; nil when it does not exist.
func (c *checker) page(path string) (*page, error) {
	if p, ok := c.pages[path]; ok {
		return p, nil
	}
	f, err := os.Open(filepath.Join(c.root, path))
	if err != nil {
		c.pages[path] = nil
		return nil, nil
	}
	defer f.Close()
	p := &page{sections: map[string]bool{}, anchors: map[string]bool{}}
	seen := map[string]int{}
	inFence := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if m := numbered.FindStringSubmatch(line); m != nil {
			p.sections[m[1]] = true
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			slug := anchorOf(m[2])
			if k := seen[slug]; k > 0 {
				p.anchors[fmt.Sprintf("%s-%d", slug, k)] = true
			} else {
				p.anchors[slug] = true
			}
			seen[slug]++
		}
	}
	c.pages[path] = p
	return p, sc.Err()
}

// anchorOf is GitHub's anchor of a heading: lower case, inline code marks and punctuation
// dropped (letters, digits, spaces, hyphens and underscores kept), spaces turned into hyphens.
func anchorOf(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func (c *checker) eachLine(rel string, fn func(n int, line string)) error {
	f, err := os.Open(filepath.Join(c.root, rel))
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		fn(n, sc.Text())
	}
	return sc.Err()
}

func (c *checker) add(file string, line int, ref, why string) {
	c.findings = append(c.findings, finding{file: file, line: line, ref: ref, why: why})
}
