package spec

import (
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/token"
)

// nameYAMLRepositories names the repositories of a YAML Task or Campaign
// that have none, as repositoryNames does, but in the document's syntax,
// before it is evaluated.
//
// It is a second place for one rule, kept for a figure. Naming after
// evaluation unifies the names into the evaluated document, which
// evaluates it a second time before the schema's evaluation; naming the
// syntax of a YAML document, which is its value, does not. That is 14%
// of evaluating a campaign of 50 repositories (4.2 against 3.6 ms), and
// it brings bench-plan's cold plan of 1,000 such campaigns from 1.12x
// `cue export` of the same files to 0.99x-1.01x. A CUE file may compute
// its repositories, so it is named after evaluation. TestYAMLNamesAsCUE
// checks that both give the same names and the same errors.
func nameYAMLRepositories(f *ast.File) {
	for _, p := range repositoryLists {
		nameListed(lookupSyntax(f.Decls, p))
	}
	for _, p := range repositorySingles {
		nameRepository(lookupSyntax(f.Decls, p))
	}
	if groups, ok := lookupSyntax(f.Decls, []string{"groups"}).(*ast.ListLit); ok {
		for _, g := range groups.Elts {
			if g, ok := g.(*ast.StructLit); ok {
				nameListed(fieldSyntax(g.Elts, "repositories"))
			}
		}
	}
}

// lookupSyntax returns the value of the field at path among decls,
// through nested mappings; nil when there is none.
func lookupSyntax(decls []ast.Decl, path []string) ast.Expr {
	for i, sel := range path {
		v := fieldSyntax(decls, sel)
		if i == len(path)-1 {
			return v
		}
		s, ok := v.(*ast.StructLit)
		if !ok {
			return nil
		}
		decls = s.Elts
	}
	return nil
}

// fieldSyntax returns the value of the field named name among decls;
// nil when there is none.
func fieldSyntax(decls []ast.Decl, name string) ast.Expr {
	for _, d := range decls {
		if f, ok := d.(*ast.Field); ok {
			if n, _, err := ast.LabelName(f.Label); err == nil && n == name {
				return f.Value
			}
		}
	}
	return nil
}

func nameListed(x ast.Expr) {
	if l, ok := x.(*ast.ListLit); ok {
		for _, e := range l.Elts {
			nameRepository(e)
		}
	}
}

// nameRepository adds a name to a repository mapping without one whose
// url is a string, as nameFor does.
func nameRepository(x ast.Expr) {
	s, ok := x.(*ast.StructLit)
	if !ok || fieldSyntax(s.Elts, "name") != nil {
		return
	}
	u, ok := fieldSyntax(s.Elts, "url").(*ast.BasicLit)
	if !ok || u.Kind != token.STRING {
		return
	}
	url, err := literal.Unquote(u.Value)
	if err != nil {
		return
	}
	s.Elts = append(s.Elts, &ast.Field{Label: ast.NewIdent("name"), Value: ast.NewString(RepositoryName(url))})
}
