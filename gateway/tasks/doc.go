// Package tasks holds what the gateway and the GenerationTask controller share
// about asynchronous image and video generation tasks: task IDs and object
// names, the submission record the gateway leaves on a task for the
// controller, the ledger archive encoding, and the simulated media backend.
package tasks
