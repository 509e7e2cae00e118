-- An acquire script: what lockbench sends by default, as a script.
-- Reply OK = acquired, nil = busy.
return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
