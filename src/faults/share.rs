//! Which requests may go on a shared server connection (a line of [`super::mux`]): those
//! whose meaning does not depend on the connection they come on. The watch's parser
//! ([`super::resp`]) and observe's ([`crate::observe::stream`]) both ask [`shares`].

/// Whether a request (`name`, its first argument `sub`) means the same on any connection:
/// it may go out on the shared line. Anything not named here gets a connection of its own.
pub(crate) fn shareable(name: &[u8], sub: Option<&[u8]>, argc: usize) -> bool {
    const SAME_ON_ANY: &[&[u8]] = &[
        b"GET",
        b"SET",
        b"SETNX",
        b"SETEX",
        b"PSETEX",
        b"GETDEL",
        b"GETEX",
        b"GETSET",
        b"DEL",
        b"UNLINK",
        b"DELEX",
        b"EXISTS",
        b"EXPIRE",
        b"PEXPIRE",
        b"EXPIREAT",
        b"PEXPIREAT",
        b"PERSIST",
        b"TTL",
        b"PTTL",
        b"EXPIRETIME",
        b"PEXPIRETIME",
        b"TYPE",
        b"INCR",
        b"INCRBY",
        b"DECR",
        b"DECRBY",
        b"INCRBYFLOAT",
        b"APPEND",
        b"STRLEN",
        b"MGET",
        b"MSET",
        b"MSETNX",
        b"HGET",
        b"HSET",
        b"HSETNX",
        b"HDEL",
        b"HGETALL",
        b"HMGET",
        b"HMSET",
        b"HINCRBY",
        b"HEXISTS",
        b"HLEN",
        b"LPUSH",
        b"RPUSH",
        b"LPOP",
        b"RPOP",
        b"LLEN",
        b"LRANGE",
        b"LREM",
        b"LINDEX",
        b"SADD",
        b"SREM",
        b"SMEMBERS",
        b"SISMEMBER",
        b"SCARD",
        b"ZADD",
        b"ZREM",
        b"ZRANGE",
        b"ZSCORE",
        b"ZCARD",
        b"ZRANGEBYSCORE",
        b"ZREMRANGEBYSCORE",
        b"EVAL",
        b"EVALSHA",
        b"EVAL_RO",
        b"EVALSHA_RO",
        b"FCALL",
        b"FCALL_RO",
        b"PING",
        b"ECHO",
        b"INFO",
        b"TIME",
        b"DBSIZE",
    ];
    let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
    let sub_is = |n: &[u8]| sub.is_some_and(|s| s.eq_ignore_ascii_case(n));
    SAME_ON_ANY.iter().any(|n| is(n))
        // The line is always in database 0, and a library's name only labels a connection.
        || (is(b"SELECT") && sub == Some(b"0"))
        || (is(b"CLIENT") && sub_is(b"SETINFO"))
        || (is(b"SCRIPT") && (sub_is(b"LOAD") || sub_is(b"EXISTS")))
        // The protocol alone: there is a line for each (with AUTH or SETNAME it is the
        // connection's own).
        || (is(b"HELLO") && argc == 2 && (sub == Some(b"2") || sub == Some(b"3")))
}

/// Whether a request may go on the shared line ([`shareable`], and
/// `CLIENT MAINT_NOTIFICATIONS` where the server refuses it); a `HELLO` switches `resp3` and
/// must open its read (`first_of_read`), so that no request before it goes on the other line.
/// The watch's parser and observe's both ask it.
pub(crate) fn shares(
    frame: &[u8],
    args: &[std::ops::Range<usize>],
    server_refuses_maint: bool,
    first_of_read: bool,
    resp3: &mut bool,
) -> bool {
    let arg = |i: usize| args.get(i).map(|r| &frame[r.clone()]);
    let Some(name) = arg(0).filter(|_| frame[0] == b'*') else {
        return false;
    };
    if name.eq_ignore_ascii_case(b"HELLO") {
        match arg(1) {
            Some(b"3") => *resp3 = true,
            Some(b"2") => *resp3 = false,
            _ => {}
        }
        if !first_of_read {
            return false;
        }
    }
    let maint = server_refuses_maint
        && name.eq_ignore_ascii_case(b"CLIENT")
        && arg(1).is_some_and(|s| s.eq_ignore_ascii_case(b"MAINT_NOTIFICATIONS"));
    maint || shareable(name, arg(1), args.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_requests_that_mean_the_same_on_any_connection_share() {
        assert!(shareable(b"get", Some(b"k"), 2));
        assert!(shareable(b"EVALSHA", Some(b"abc"), 3));
        assert!(shareable(b"select", Some(b"0"), 2));
        assert!(shareable(b"client", Some(b"setinfo"), 4));
        assert!(shareable(b"HELLO", Some(b"3"), 2));
        assert!(!shareable(b"HELLO", Some(b"3"), 5), "HELLO 3 AUTH u p");
        for (name, sub) in [
            (&b"SELECT"[..], Some(&b"1"[..])),
            (b"MULTI", None),
            (b"WATCH", Some(b"k")),
            (b"BLPOP", Some(b"k")),
            (b"SUBSCRIBE", Some(b"c")),
            (b"AUTH", Some(b"p")),
            (b"HELLO", Some(b"4")),
            (b"CLIENT", Some(b"REPLY")),
            (b"QUIT", None),
            (b"SCRIPT", Some(b"FLUSH")),
        ] {
            assert!(
                !shareable(name, sub, 2),
                "{}",
                String::from_utf8_lossy(name)
            );
        }
    }
}
