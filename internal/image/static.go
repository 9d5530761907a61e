package image

import (
	"bytes"
	"debug/elf"
	"fmt"
)

// checkStatic refuses an ELF file that needs a dynamic loader or shared
// libraries: the images have no libc and no loader. Other files pass.
func checkStatic(name string, data []byte) error {
	if !bytes.HasPrefix(data, []byte(elf.ELFMAG)) {
		return nil
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("/%s: unreadable ELF file: %w", name, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("/%s is dynamically linked (it has a PT_INTERP program header: it needs a loader and libc the image does not have); fix: build it with CGO_ENABLED=0", name)
		}
	}
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		return fmt.Errorf("/%s needs shared libraries %v the image does not have; fix: build it statically", name, libs)
	}
	return nil
}
