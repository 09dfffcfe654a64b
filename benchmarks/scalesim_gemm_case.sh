#!/bin/sh
# SCALE-Sim 3.0 reference run of one GEMM (docs/npu-gemm.md). usage: scalesim_gemm_case.sh NAME H W ws|os M N K
# SCALESIM_SRC: a scale-sim-v3 checkout; SCALESIM_PY: a python with numpy<2, pandas, tqdm, absl-py; OUT: output dir
name=$1; R=$2; C=$3; DF=$4; M=$5; N=$6; K=$7
d=${OUT:-$PWD}/$name; mkdir -p $d
cat > $d/cfg.cfg <<CFG
[general]
run_name = $name

[architecture_presets]
ArrayHeight:    $R
ArrayWidth:     $C
IfmapSramSzkB:   65536
FilterSramSzkB:  65536
OfmapSramSzkB:   65536
IfmapOffset:    0
FilterOffset:   10000000
OfmapOffset:    20000000
Bandwidth : 10
Dataflow : $DF
MemoryBanks:   1
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: 10
IfmapSRAMBankNum: 10
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: 10
FilterSRAMBankNum: 10
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport : false
SparseRep : ellpack_block
OptimizedMapping : false
BlockSize : 8
RandomNumberGeneratorSeed : 40

[run_presets]
InterfaceBandwidth: CALC
UseRamulatorTrace: False
CFG
printf 'Layer,M,N,K,\ng0,%s,%s,%s,\n' $M $N $K > $d/topo.csv
cd "$SCALESIM_SRC" && PYTHONPATH=. "$SCALESIM_PY" scalesim/scale.py -c $d/cfg.cfg -t $d/topo.csv -p $d/out -i gemm -s N > $d/log.txt 2>&1
cat $d/out/$name/COMPUTE_REPORT.csv
