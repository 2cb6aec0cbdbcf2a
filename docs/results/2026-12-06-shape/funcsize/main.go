// Command funcsize prints the size distribution of the non-test Go
// functions under the given directories (lines from func to its closing
// brace) and every function above a limit, for issue 28's evidence.
//
//	go run ./docs/results/2026-12-06-shape/funcsize [-over 80] DIR...
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

type fn struct {
	name  string
	lines int
}

func main() {
	over := flag.Int("over", 80, "list the functions longer than this")
	flag.Parse()
	fset := token.NewFileSet()
	var fns []fn
	for _, root := range flag.Args() {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(p, "docs")) && p != root {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				name := fd.Name.Name
				if fd.Recv != nil && len(fd.Recv.List) > 0 {
					name = fmt.Sprintf("(%s).%s", types(fd.Recv.List[0].Type), name)
				}
				n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				fns = append(fns, fn{filepath.Dir(p) + "." + name, n})
			}
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	slices.SortFunc(fns, func(a, b fn) int { return b.lines - a.lines })
	total := 0
	var sizes []int
	for _, f := range fns {
		total += f.lines
		sizes = append(sizes, f.lines)
	}
	slices.Sort(sizes)
	q := func(p float64) int { return sizes[int(p*float64(len(sizes)-1))] }
	fmt.Printf("%d functions, %d lines: mean %.1f, median %d, p90 %d, p99 %d, max %d\n", len(fns), total, float64(total)/float64(len(fns)), q(0.5), q(0.9), q(0.99), sizes[len(sizes)-1])
	n := 0
	for _, f := range fns {
		if f.lines > *over {
			n++
		}
	}
	fmt.Printf("%d functions over %d lines:\n", n, *over)
	for _, f := range fns {
		if f.lines > *over {
			fmt.Printf("  %4d %s\n", f.lines, f.name)
		}
	}
}

func types(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return "*" + types(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.IndexExpr:
		return types(t.X)
	}
	return "?"
}
