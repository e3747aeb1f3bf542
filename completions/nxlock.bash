# bash completion for nxlock(1): commands, options, option values and run-locked's command line.

# Global options that take a value, and those of each command: one line each,
# as the lookup below matches " OPTION " (a newline would hide the word before it).
# (--timeout: the deprecated name of --io-timeout, known but not offered.)
_nxlock_global_value_opts='-u --url --password-file --io-timeout --timeout --prefix --json-fd --cacert --cacertdir --cert --key --sni --sentinel-password-file --replicas'
_nxlock_lock_value_opts='-t --ttl -w --wait -E --conflict-exit-code --clock --slots --jitter --max-waiters'
_nxlock_run_value_opts="$_nxlock_lock_value_opts -c --command --on-lost --kill-after --hold --max-runtime --metrics-dir"
_nxlock_run_value_opts="$_nxlock_run_value_opts --ping --ping-file --ping-cacert --ping-timeout"

# The index in COMP_WORDS of word $1 of words[]: they differ when ':' or '='
# split a word (redis://host:6379), and _command_offset counts in COMP_WORDS.
_nxlock_comp_index()
{
    local target=$1 w=0 c=0 joined
    while ((w < target && c <= COMP_CWORD)); do
        joined=${COMP_WORDS[c]}
        ((c++))
        while [[ $joined != "${words[w]}" ]] && ((c <= COMP_CWORD)); do
            joined+=${COMP_WORDS[c]}
            ((c++))
        done
        ((w++))
    done
    echo "$c"
}

# Without the bash-completion package (no _init_completion, _filedir,
# _command_offset): plain completion, as bash itself would do it, rather than
# "command not found" on every TAB.
_nxlock_filedir()
{
    if declare -F _filedir >/dev/null; then
        _filedir "$@"
    elif [[ $1 == -d ]]; then
        COMPREPLY=($(compgen -d -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}

_nxlock()
{
    local cur prev words cword split=false
    if declare -F _init_completion >/dev/null; then
        _init_completion -s -n : || return
    else
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD - 1]}
    fi

    local commands='setnx get getset del lock unlock renew status list run-locked doctor help'
    local globals='-u --url --password-file --io-timeout --prefix --cacert --cacertdir --cert
        --key --sni --insecure --sentinel-password-file --replicas --json --json-fd -q --quiet -v --verbose -h --help --help-all --version'

    # Find the command, and for run-locked where its KEY is (options end there).
    local i word command='' value_opts=$_nxlock_global_value_opts ended=''
    for ((i = 1; i < cword; i++)); do
        word=${words[i]}
        if [[ -z $ended && $word == -- ]]; then
            [[ -n $command ]] && ended=1
            continue
        fi
        if [[ -z $ended && $word == -* ]]; then
            # An option that takes a value in the next word (not --opt=value).
            [[ " $value_opts " == *" $word "* ]] && ((i++))
            continue
        fi
        if [[ -z $command ]]; then
            command=$word
            case $command in
                lock) value_opts+=" $_nxlock_lock_value_opts" ;;
                run-locked) value_opts+=" $_nxlock_run_value_opts" ;;
                renew) value_opts+=" -t --ttl --clock --slots" ;;
                unlock | status) value_opts+=" --clock --slots" ;;
            esac
            continue
        fi
        if [[ $command == run-locked ]]; then
            # words[i] is KEY: the child's command line starts after it (and one --).
            ((i + 1 < cword)) && [[ ${words[i + 1]} == -- ]] && ((i++))
            if declare -F _command_offset >/dev/null; then
                _command_offset "$(_nxlock_comp_index $((i + 1)))"
            elif ((i + 1 == cword)); then
                COMPREPLY=($(compgen -c -- "$cur"))
            else
                COMPREPLY=($(compgen -f -- "$cur"))
            fi
            return
        fi
        # help COMMAND...: command names.
        [[ $command == help ]] && break
    done

    if [[ $command == help ]]; then
        COMPREPLY=($(compgen -W "$commands" -- "$cur"))
        return
    fi

    # Values of the option before the cursor.
    case $prev in
        --on-lost)
            COMPREPLY=($(compgen -W 'term kill ignore' -- "$cur"))
            return
            ;;
        --clock)
            COMPREPLY=($(compgen -W 'server local' -- "$cur"))
            return
            ;;
        -u | --url)
            if [[ $cur == @(unix|file)://* ]]; then
                # A path after the scheme: complete it as one.
                local scheme=${cur%%://*}://
                cur=${cur#*://}
                _nxlock_filedir
                COMPREPLY=("${COMPREPLY[@]/#/$scheme}")
                cur=$scheme$cur
            else
                COMPREPLY=($(compgen -W 'redis:// rediss:// redis+sentinel:// rediss+sentinel:// unix:// file:// etcd:// etcds://' -- "$cur"))
            fi
            compopt -o nospace 2>/dev/null
            declare -F __ltrim_colon_completions >/dev/null && __ltrim_colon_completions "$cur"
            return
            ;;
        --password-file | --cacert | --cert | --key | --sentinel-password-file)
            _nxlock_filedir
            return
            ;;
        --ping-file | --ping-cacert)
            _nxlock_filedir
            return
            ;;
        --ping | --ping-timeout)
            return # a URL or a number: nothing to offer
            ;;
        --cacertdir | --metrics-dir)
            _nxlock_filedir -d
            return
            ;;
        --io-timeout | --timeout | --prefix | --json-fd | --sni | --replicas | -t | --ttl | -w | --wait | -E | --conflict-exit-code | --kill-after | --hold | --max-runtime | --slots | --jitter | --max-waiters | -c | --command)
            return # a number or free text: nothing to offer
            ;;
    esac
    [[ $split == true ]] && return

    if [[ -z $command ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "$globals" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$commands" -- "$cur"))
        fi
        return
    fi

    if [[ $cur == -* && -z $ended ]]; then
        local opts=''
        case $command in
            lock) opts='-t --ttl -n --nonblock -w --wait -E --conflict-exit-code -s --shared -x --exclusive --jitter --max-waiters --clock --slots --syslog' ;;
            run-locked)
                opts='-t --ttl -n --nonblock -w --wait -E --conflict-exit-code -s --shared -x --exclusive --jitter --max-waiters --clock --slots
                    -c --command --no-renew --inherit-credentials --on-lost --kill-after --hold
                    --ping --ping-file --ping-cacert --ping-timeout --ping-on-busy --replace
                    --max-runtime --metrics-dir --syslog --'
                ;;
            unlock) opts='-f --force --clock --slots --syslog' ;;
            renew) opts='-t --ttl --clock --slots' ;;
            status) opts='--clock --slots' ;;
            setnx | get | getset | del) opts='--' ;;
            list) opts='--expired --waiters' ;;
            doctor) opts='' ;; # the global options only
        esac
        COMPREPLY=($(compgen -W "$opts $globals" -- "$cur"))
    fi
    # Keys and values are the user's own: nothing to offer.
} &&
    complete -F _nxlock nxlock

# ex: filetype=sh
