package version

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
)

// Flag is --version as component-base's verflag has it: --version prints
// the version, --version=raw the whole version struct. verflag itself
// prints "Kubernetes <version>", which would name the wrong program.
type Flag string

const (
	flagOff  Flag = "false"
	flagOn   Flag = "true"
	flagRaw  Flag = "raw"
	flagName      = "version"
)

func (f *Flag) String() string {
	if *f == "" {
		return string(flagOff)
	}
	return string(*f)
}

func (f *Flag) Set(s string) error {
	switch Flag(s) {
	case flagOff, flagOn, flagRaw:
		*f = Flag(s)
		return nil
	}
	return fmt.Errorf("want true, false or raw, got %q", s)
}

func (f *Flag) Type() string { return "version" }

// AddFlag registers --version on fs.
func (f *Flag) AddFlag(fs *pflag.FlagSet) {
	fs.Var(f, flagName, "--version, --version=raw prints version information and quits")
	fs.Lookup(flagName).NoOptDefVal = string(flagOn)
}

// Print writes the version if --version was given and reports whether it did.
func (f *Flag) Print(out io.Writer, info apimachineryversion.Info) bool {
	switch *f {
	case flagOn:
		fmt.Fprintln(out, Get().String())
		return true
	case flagRaw:
		fmt.Fprintf(out, "%#v\n", info)
		return true
	}
	return false
}
