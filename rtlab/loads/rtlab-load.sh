# rtlab load helper (rtlab/loads/rtlab-load.sh); dash and busybox ash.
# Shipped to boards by the labgrid path (put_file over the console) and by
# LAVA jobs (a heredoc in the test definition): the same file both ways.
#   sh rtlab-load.sh sample DIR          a sample a second until DIR/stop exists, or the
#                                        load's deadline (DIR/deadline, board uptime)
#   sh rtlab-load.sh snap DIR            one sample now, dead parts, /proc/stat CPU lines
#   sh rtlab-load.sh stop DIR SIGNALS    signal the load's session, one signal after another
what=$1
cd "$2" || exit 1
# the lab's own bookkeeping must not starve behind the load it watches
renice -20 -p $$ > /dev/null 2>&1

# n: live (non-zombie) processes of the session; t: their CPU ticks (utime,
# stime, cutime, cstime: exited children count through their parent)
measure() {
    n=0; t=0; sid=
    { read -r sid < sid; } 2>/dev/null
    [ -n "$sid" ] || return 0
    set -- $(cat /proc/[0-9]*/stat 2>/dev/null | awk -v sid="$sid" '
        { i = index($0, ") "); split(substr($0, i + 2), f, " ")
          if (f[4] != sid) next
          t += f[12] + f[13] + f[14] + f[15]; if (f[1] != "Z") n++ }
        END { print n + 0, t + 0 }')
    n=${1:-0}; t=${2:-0}
}

# a: essential parts alive (not zombies); p: parts; with an argument, print dead ones
parts() {
    a=0; p=0
    [ -f parts ] || return 0
    while read -r name pid; do
        p=$((p + 1))
        l=
        { read -r l < "/proc/$pid/stat"; } 2>/dev/null
        set -- ${l##*) } Z
        if [ -n "$l" ] && [ "$1" != Z ]; then a=$((a + 1)); elif [ -n "$dead" ]; then echo "dead $name"; fi
    done < parts
}

case $what in
sample)
    echo $$ > sampler.pid
    # a deadline of its own: the load's (its cmd.sh writes it first), else 8 days
    read -r up _ < /proc/uptime
    until=$((${up%.*} + 691200))
    while [ ! -e stop ]; do
        measure; parts
        read -r up _ < /proc/uptime
        echo "$up $n $t $a $p" >> samples.txt
        { read -r dl < deadline; } 2>/dev/null && [ -n "$dl" ] && until=$dl
        [ "${up%.*}" -ge "$until" ] && break
        sleep 1
    done
    ;;
snap)
    dead=1
    measure; parts
    read -r up _ < /proc/uptime
    echo "sample $up $n $t $a $p"
    while read -r name rest; do
        case $name in cpu*) echo "$name $rest" ;; *) break ;; esac
    done < /proc/stat
    ;;
stop)
    : > stop
    { read -r sid < sid; } 2>/dev/null || exit 0
    for sig in $3; do
        # were parts alive when this signal went out? If none were, the signal
        # is for the rest of the session, and the stop waits for it to end
        parts; before=$a
        kill -"$sig" "-$sid" 2>/dev/null
        # up to 5 s for the graceful signal (stress-ng writes its YAML), 3 s after
        read -r up _ < /proc/uptime
        limit=$((${up%.*} + 3)); [ "$sig" = INT ] && limit=$((limit + 2))
        while :; do
            measure
            [ "$n" -eq 0 ] && break
            # this signal ended the parts: on to the next signal now. The rest
            # of the session (cmd.sh, the deadline's sleep) started in the
            # background of a non-interactive shell, so it ignores SIGINT and
            # would hold the wait to its limit
            parts
            if [ "$before" -gt 0 ] && [ "$a" -eq 0 ] && [ "$sig" != "${3##* }" ]; then
                echo "signal $sig: parts gone"; break
            fi
            read -r up _ < /proc/uptime
            if [ "${up%.*}" -ge "$limit" ]; then echo "signal $sig: limit"; break; fi
            sleep 0.1
        done
        if [ "$n" -eq 0 ]; then echo "signal $sig: session gone"; break; fi
    done
    { read -r sp < sampler.pid; } 2>/dev/null && kill "$sp" 2>/dev/null
    echo "stopped $sid left $n"
    ;;
esac
