# fish completion for nxlock(1): commands, options, option values and run-locked's command line.

# Options that take a value in the next word: global ones, then those of lock and run-locked.
# (--timeout: the deprecated name of --io-timeout, known here but not offered.)
set -g __fish_nxlock_value_opts -u --url --password-file --io-timeout --timeout --prefix --json-fd \
    --cacert --cacertdir --cert --key --sni --sentinel-password-file --replicas \
    -t --ttl -w --wait -E --conflict-exit-code --clock --slots -c --command --on-lost --kill-after \
    --hold --max-runtime --metrics-dir --jitter --max-waiters \
    --ping --ping-file --ping-cacert --ping-timeout

# Prints the words of run-locked's child command line typed so far (those after
# KEY and one optional --), and succeeds, if the cursor is in that command line.
function __fish_nxlock_child_words
    set -l words (commandline -opc)
    set -e words[1]
    set -l command
    set -l ended 0
    while set -q words[1]
        set -l word $words[1]
        set -e words[1]
        if test $ended = 0; and string match -q -- '-*' $word
            if test "$word" = --; and set -q command[1]
                set ended 1
            else if contains -- $word $__fish_nxlock_value_opts
                set -e words[1]
            end
            continue
        end
        if not set -q command[1]
            set command $word
            continue
        end
        test "$command" = run-locked; or return 1
        # $word is KEY: the rest belongs to the child.
        if test "$words[1]" = --
            set -e words[1]
        end
        set -q words[1]; and printf '%s\n' $words
        return 0
    end
    return 1
end

function __fish_nxlock_in_child
    __fish_nxlock_child_words >/dev/null
end

# Completes the child's command line as a command line of its own.
function __fish_nxlock_complete_child
    set -l words (__fish_nxlock_child_words)
    # (`string escape` with no arguments would read stdin.)
    set -q words[1]; and set words (string escape -- $words)
    complete -C (string join -- ' ' $words (commandline -ct))
end

# The command given so far, if any.
function __fish_nxlock_command
    set -l words (commandline -opc)
    set -e words[1]
    while set -q words[1]
        set -l word $words[1]
        set -e words[1]
        if string match -q -- '-*' $word
            contains -- $word $__fish_nxlock_value_opts; and set -e words[1]
            continue
        end
        echo $word
        return 0
    end
    return 1
end

function __fish_nxlock_using
    not __fish_nxlock_in_child; and contains -- (__fish_nxlock_command) $argv
end

function __fish_nxlock_no_command
    not __fish_nxlock_command >/dev/null
end

complete -c nxlock -f

# The child's command line after `run-locked [options] KEY`.
complete -c nxlock -n __fish_nxlock_in_child -a '(__fish_nxlock_complete_child)'

# Commands.
set -l no_command __fish_nxlock_no_command
complete -c nxlock -n $no_command -a setnx -d 'Set KEY to VALUE if KEY does not exist'
complete -c nxlock -n $no_command -a get -d 'Print the value of KEY'
complete -c nxlock -n $no_command -a getset -d 'Set KEY to VALUE and print the old value'
complete -c nxlock -n $no_command -a del -d 'Delete keys'
complete -c nxlock -n $no_command -a lock -d 'Take the lock KEY and print its value'
complete -c nxlock -n $no_command -a unlock -d 'Release the lock KEY if it still holds VALUE'
complete -c nxlock -n $no_command -a renew -d 'Extend the lock KEY that still holds VALUE'
complete -c nxlock -n $no_command -a status -d 'Show whether the lock KEY is held'
complete -c nxlock -n $no_command -a list -d 'List the locks held now'
complete -c nxlock -n $no_command -a run-locked -d 'Run COMMAND while holding the lock KEY'
complete -c nxlock -n $no_command -a doctor -d 'Check that the backend is fit for locks'
complete -c nxlock -n $no_command -a help -d "Show a command's help"
# help COMMAND...: command names.
complete -c nxlock -n '__fish_nxlock_using help' -a 'setnx get getset del lock unlock renew status list run-locked doctor'

# Global options, before or after the command name.
set -l global 'not __fish_nxlock_in_child'
# A quorum repeats -u with independent Redis servers; etcd is one URL of its members.
complete -c nxlock -n $global -s u -l url -x -a 'redis://\t"Redis (repeat -u for a quorum)" rediss://\t"Redis over TLS" redis+sentinel://\t"Redis through Sentinels" rediss+sentinel://\t"Redis through Sentinels, over TLS" unix://\t"Redis on a unix socket" file://\t"the embedded store" etcd://\t"etcd: every member in one URL" etcds://\t"etcd over TLS: every member in one URL"' -d 'Backend URL'
complete -c nxlock -n $global -l password-file -r -F -d 'Read the Redis password from FILE'
complete -c nxlock -n $global -l io-timeout -x -d "The backend's connect and command timeout, seconds (default 2)"
complete -c nxlock -n $global -l prefix -x -d 'Prepended to every key'
complete -c nxlock -n $global -l cacert -r -F -d 'rediss: verify the server with the CAs in FILE'
complete -c nxlock -n $global -l cacertdir -x -a '(__fish_complete_directories)' -d 'rediss: verify the server with the CAs in DIR'
complete -c nxlock -n $global -l cert -r -F -d 'rediss: present this client certificate'
complete -c nxlock -n $global -l key -r -F -d "rediss: the client certificate's private key"
complete -c nxlock -n $global -l sni -x -a '(__fish_print_hostnames)' -d 'rediss: the server name to send and check'
complete -c nxlock -n $global -l insecure -d "rediss: do not verify the server's certificate or name"
complete -c nxlock -n $global -l sentinel-password-file -r -F -d "redis+sentinel: read the Sentinels' own password from FILE"
complete -c nxlock -n $global -l replicas -x -d 'Redis: lock writes wait until N replicas have them'
complete -c nxlock -n $global -l json -d 'Print one JSON object on stdout'
complete -c nxlock -n $global -l json-fd -x -d 'Print the JSON object on descriptor N instead of stdout'
complete -c nxlock -n $global -s q -l quiet -d 'Say less on stderr'
complete -c nxlock -n $global -s v -l verbose -d 'Trace each backend step on stderr'
complete -c nxlock -n $global -s h -l help -d 'Show help'
complete -c nxlock -n $global -l help-all -d 'Show help for every command'
complete -c nxlock -n "$global; and $no_command" -l version -d 'Print the version and backends'

# lock and run-locked.
set -l locking '__fish_nxlock_using lock run-locked'
complete -c nxlock -n $locking -s t -l ttl -x -d 'Seconds the lock holds without renewal (default 60)'
complete -c nxlock -n $locking -s n -l nonblock -d 'Try once; do not wait'
complete -c nxlock -n $locking -s w -l wait -x -d 'Give up after SECONDS'
complete -c nxlock -n $locking -s E -l conflict-exit-code -x -d 'Exit status when busy (default 75)'
complete -c nxlock -n $locking -s s -l shared -d 'Hold the lock shared, as flock -s'
complete -c nxlock -n $locking -s x -l exclusive -d 'Hold the lock exclusive, as flock -x (the default)'
complete -c nxlock -n $locking -l jitter -x -d 'Wait a random 0..SECONDS before the first try'
complete -c nxlock -n $locking -l max-waiters -x -d 'Do not wait if N or more live waiters are ahead'

# --clock: every lock command.
complete -c nxlock -n '__fish_nxlock_using lock unlock renew status run-locked' -l clock -x \
    -a 'server\t"the Redis server\'s TIME (default)" local\t"this host\'s clock"' \
    -d 'Whose clock decides expiry'

# --slots: every lock command.
complete -c nxlock -n '__fish_nxlock_using lock unlock renew status run-locked' -l slots -x \
    -d 'A counting semaphore: at most N holders at once (1-1000)'

# --syslog: the commands that take or release a lock.
complete -c nxlock -n '__fish_nxlock_using lock unlock run-locked' -l syslog \
    -d 'Log each event (taken, busy, released, lost, ended) to the system log'

# unlock, renew.
complete -c nxlock -n '__fish_nxlock_using unlock' -s f -l force -d 'Delete whatever the key holds'
complete -c nxlock -n '__fish_nxlock_using renew' -s t -l ttl -x -d 'Seconds from now the lock holds (default 60)'

# list.
complete -c nxlock -n '__fish_nxlock_using list' -l expired -d 'Also list expired, abandoned locks'
complete -c nxlock -n '__fish_nxlock_using list' -l waiters -d 'Also show each waiter'

# run-locked.
set -l run '__fish_nxlock_using run-locked'
complete -c nxlock -n $run -s c -l command -x -d 'Run STRING with /bin/sh -c, as flock -c'
complete -c nxlock -n $run -l no-renew -d 'Do not renew the lock while COMMAND runs'
complete -c nxlock -n $run -l inherit-credentials -d 'Let COMMAND inherit the Redis passwords in the environment'
complete -c nxlock -n $run -l on-lost -x \
    -a 'term\t"SIGTERM, then SIGKILL (default)" kill\t"SIGKILL at once" ignore\t"only warn"' \
    -d 'What to do if the lock is lost'
complete -c nxlock -n $run -l kill-after -x -d 'Seconds between SIGTERM and SIGKILL (default 10)'
complete -c nxlock -n $run -l hold -x -d 'Keep the lock SECONDS after it was taken (once per tick across hosts)'
complete -c nxlock -n $run -l max-runtime -x -d 'Stop COMMAND after SECONDS, release the lock, exit 124'
complete -c nxlock -n $run -l metrics-dir -x -a '(__fish_complete_directories)' -d 'Write nxlock_KEY.prom for the node_exporter textfile collector'
complete -c nxlock -n $run -l ping -x -d 'Ping a healthchecks.io-style checker: URL/start, then URL or URL/STATUS'
complete -c nxlock -n $run -l ping-file -r -F -d "Read --ping's URL from FILE"
complete -c nxlock -n $run -l ping-cacert -r -F -d 'Verify an https checker with the CAs in FILE'
complete -c nxlock -n $run -l ping-timeout -x -d "The most a ping may delay nxlock's exit (default 2)"
complete -c nxlock -n $run -l ping-on-busy -d 'A run skipped on a busy lock pings success (per-host checks)'
complete -c nxlock -n $run -l replace -d 'Ask the run-locked holding KEY to stop its job, then take the lock'
