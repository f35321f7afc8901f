package lathe

/*
#include "lathe.h"
*/
import "C"

// JobInfo returns this process's index in its job of several processes and the job's process
// count; (0, 1) outside a job. A process joins a job when it makes its first lathe backend with a
// job's options (coordinator=, processes=, process=, token=) or environment (LATHE_COORDINATOR,
// LATHE_NUM_PROCESSES, LATHE_PROCESS_ID, LATHE_JOB_TOKEN, or torchrun's MASTER_ADDR/MASTER_PORT,
// WORLD_SIZE, RANK); see docs/ARCHITECTURE.md "A job of several processes".
//
// In a job every AllReduce reduces over the replicas of all processes (processes times the
// program's own devices): a data-parallel mean must divide by that global count, or by the
// global batch size.
func JobInfo() (process, processes int) {
	var p, n C.int
	C.lathe_job_info(&p, &n)
	return int(p), int(n)
}
