package tasks

// ReviewChannel names a backend for review records: review is per channel.
func ReviewChannel(routeNamespace, routeName, backend string) string {
	return routeNamespace + "/" + routeName + "/" + backend
}
