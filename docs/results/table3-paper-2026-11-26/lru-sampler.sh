#!/bin/bash
# Samples the experiment cgroup's LRU lists every 10 s (for the Table 3 notes).
out=/var/tmp/exp/lru-samples.csv
echo "time,cgroup,active_file,inactive_file,workingset_refault_file,workingset_activate,kmem,tcp" >> $out
while true; do
  for d in /sys/fs/cgroup/memory/vidbench-*/; do
    [ -f $d/memory.stat ] || continue
    s=$d/memory.stat
    a=$(awk '$1=="active_file"{print $2}' $s); i=$(awk '$1=="inactive_file"{print $2}' $s)
    r=$(awk '$1=="workingset_refault_file"{print $2}' $s); w=$(awk '$1=="workingset_activate_file"{print $2}' $s)
    echo "$(date +%s),$(basename $d),$a,$i,$r,$w,$(cat $d/memory.kmem.usage_in_bytes),$(cat $d/memory.kmem.tcp.usage_in_bytes)" >> $out
  done
  sleep 10
done
