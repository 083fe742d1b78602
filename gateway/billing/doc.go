// Package billing holds the money types of modelgate: integer quota units and
// the exact decimal conversions between quota, USD and credits.
package billing
