# rtlab LAVA load steps (rtlab/lava/rtlab-lava-load.sh): what the labgrid
# path does over the console (rtlab.loads.BoardLoad), run unattended
#   sh rtlab-lava-load.sh start DIR PARTS TIMEOUT SETTLE CPUS HELPER [DIE_AFTER_S]
#   sh rtlab-lava-load.sh end DIR HELPER SIGNALS
what=$1
d=$2
cd "$d" || exit 1
case $what in
start)
    parts=$3; timeout=$4; settle=$5; cpus=$6; helper=$7; die=$8
    (setsid sh ./cmd.sh > cmd.log 2>&1 < /dev/null &)
    (setsid taskset -c "$cpus" sh "$helper" sample "$d" > /dev/null 2>&1 < /dev/null &)
    read -r up _ < /proc/uptime
    limit=$((${up%.*} + timeout))
    while :; do
        sleep 0.3
        sh "$helper" snap "$d" > snap.txt
        # sample UPTIME PROCS TICKS ALIVE PARTS
        set -- $(grep '^sample ' snap.txt) x x x x x x
        if [ "$6" = "$parts" ] && [ "$5" = "$parts" ] && [ "$3" != 0 ] && [ "$4" != 0 ] &&
           sh ./ready.sh > /dev/null 2>&1; then
            break
        fi
        if [ "$6" = "$parts" ] && [ "$5" != "$parts" ]; then
            echo "did not start: $(grep '^dead ' snap.txt | cut -d' ' -f2 | tr '\n' ' ')exited at once" \
                > start-failed
            break
        fi
        read -r up _ < /proc/uptime
        if [ "${up%.*}" -ge "$limit" ]; then
            echo "did not start within $timeout s" > start-failed
            break
        fi
    done
    if [ -e start-failed ]; then
        sh "$helper" stop "$d" "KILL" > stop.txt
        tail -n 3 cmd.log >> start-failed 2>/dev/null
        exit 1
    fi
    sleep "$settle"
    sh "$helper" snap "$d" > first.txt
    if [ -n "$die" ]; then  # test only: the load's session is killed DIE s into the measurement
        (setsid sh -c "sleep $die; echo 'die_after_s: killing the load' > $d/died; kill -KILL -\$(cat $d/sid)" \
            > /dev/null 2>&1 < /dev/null &)
    fi
    ;;
end)
    helper=$3
    sh "$helper" snap "$d" > last.txt
    sh "$helper" stop "$d" "$4" > stop.txt
    ;;
esac
