module github.com/samcharles93/mantle/tools/mcffixtures

go 1.26

require github.com/samcharles93/mantle v0.0.0-00010101000000-000000000000

require (
	github.com/goccy/go-json v0.10.5 // indirect
	golang.org/x/sys v0.41.0 // indirect
)

replace github.com/samcharles93/mantle => ../../../mantle-src
