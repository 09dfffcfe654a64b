// Drive an unmodified DRAMsim3 library with a DRAMsim3 trace file until every request of the trace is done.
//
// dramsim3main runs a fixed number of cycles (-c) and so cannot say when a trace finishes. This driver uses only
// DRAMsim3's public interface (dramsim3.h: GetMemorySystem, ClockTick, WillAcceptTransaction, AddTransaction,
// the read / write callbacks, PrintStats) with the same front end as its TraceBasedCPU: each memory cycle the
// system ticks first, then the next trace request is offered once (its time stamp reached) and handed over if
// accepted. It stops at the first cycle by which every read's data has been returned and every write has been
// acknowledged (DRAMsim3 posts writes: a write is acknowledged the cycle after it enters the write buffer, and the
// write commands still buffered then are not waited for, as its own trace runs would not). Then it prints the
// end cycle, the last hand-over cycle and the wall time of the loop as one JSON line and writes DRAMsim3's own
// statistics (OUTDIR/dramsim3.json) with PrintStats.
//
//   g++ -O2 -std=c++11 dramsim3_driver.cc -I DRAMSIM3/src -L DRAMSIM3 -ldramsim3 -Wl,-rpath,DRAMSIM3 -o driver
//   driver CONFIG.ini TRACE OUTDIR
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "dramsim3.h"

struct Request {
    uint64_t addr;
    bool is_write;
    uint64_t cycle;
};

int main(int argc, char **argv) {
    if (argc != 4) {
        std::cerr << "usage: driver CONFIG.ini TRACE OUTDIR" << std::endl;
        return 2;
    }
    std::vector<Request> reqs;
    {
        std::ifstream in(argv[2]);
        if (!in) {
            std::cerr << "cannot read trace " << argv[2] << std::endl;
            return 2;
        }
        std::string addr, op;
        uint64_t cycle;
        while (in >> addr >> op >> cycle) {
            bool w = (op == "WRITE" || op == "write" || op == "W" || op == "w" || op == "P_MEM_WR");
            reqs.push_back({std::stoull(addr, nullptr, 16), w, cycle});
        }
    }
    uint64_t done = 0;
    auto on_done = [&done](uint64_t) { done += 1; };
    std::string outdir = std::string(argv[3]) + "/";
    dramsim3::MemorySystem *mem = dramsim3::GetMemorySystem(argv[1], outdir, on_done, on_done);

    size_t next = 0;
    uint64_t clk = 0, last_accept = 0;
    auto t0 = std::chrono::steady_clock::now();
    while (done < reqs.size()) {
        mem->ClockTick();
        if (next < reqs.size() && reqs[next].cycle <= clk &&
            mem->WillAcceptTransaction(reqs[next].addr, reqs[next].is_write)) {
            mem->AddTransaction(reqs[next].addr, reqs[next].is_write);
            last_accept = clk;
            next += 1;
        }
        clk += 1;
    }
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    mem->PrintStats();
    std::printf("{\"end_cycle\": %llu, \"last_accept_cycle\": %llu, \"requests\": %zu, \"wall_s\": %.6f}\n",
                (unsigned long long)clk, (unsigned long long)last_accept, reqs.size(), wall);
    delete mem;
    return 0;
}
