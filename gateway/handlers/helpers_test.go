package handlers_test

import "strconv"

func jsonInt(v int64) string { return strconv.FormatInt(v, 10) }
