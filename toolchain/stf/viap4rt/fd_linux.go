package viap4rt

import "golang.org/x/sys/unix"

func closeFD(fd int) error { return unix.Close(fd) }
