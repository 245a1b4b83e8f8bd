// main() for mpirun-launched Catch2 suites.
//
// Every rank runs the same test cases (they call collectives together). Rank 0 prints the
// report; the other ranks write theirs to a temporary file that is printed, prefixed with the
// rank, only when that rank failed. The exit code is non-zero when any rank failed, so a
// failure on any rank fails the ctest entry.
//
// Suites that must decide something before the tests run (tests/gpu/gpu_mpi_main.cc: skip when a
// rank sees no GPU) compile this file with DTENSOR_MPI_SUITE_NO_MAIN, construct the one Runtime
// themselves and call dtensor_run_mpi_suite.
#define CATCH_CONFIG_RUNNER
#include <mpi.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "dtensor/collectives/runtime.h"

// Runs the Catch session on every rank (MPI initialised by the caller's Runtime) and merges the
// results: 0 when every rank passed.
int dtensor_run_mpi_suite(int argc, char** argv) {
  const int rank = dtensor::world_rank();

  std::vector<const char*> args(argv, argv + argc);
  std::string report_path;
  if (rank != 0) {
    report_path = "/tmp/dtensor_test_rank" + std::to_string(rank) + "_" +
                  std::to_string(static_cast<long>(::getpid())) + ".txt";
    args.push_back("--out");
    args.push_back(report_path.c_str());
  }

  Catch::Session session;
  int rc = session.applyCommandLine(static_cast<int>(args.size()), args.data());
  int failed = rc != 0 ? 1 : session.run();

  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank != 0) {
    if (failed) {
      std::ifstream in(report_path);
      std::string line;
      while (std::getline(in, line)) std::cerr << "[rank " << rank << "] " << line << "\n";
    }
    std::remove(report_path.c_str());
  }
  if (rank == 0 && any_failed && !failed) {
    std::cerr << "a test failed on another rank (its report is above)\n";
  }
  return any_failed ? 1 : 0;
}

#ifndef DTENSOR_MPI_SUITE_NO_MAIN
int main(int argc, char** argv) {
  dtensor::Runtime runtime(&argc, &argv);
  return dtensor_run_mpi_suite(argc, argv);
}
#endif
