-- The classic broken release: it deletes the key without looking whose token it holds.
-- A holder whose lock expired deletes the next holder's lock (a wrongful delete).
-- Ships as lockbench's negative control for `release = "script"`.
return redis.call('DEL', KEYS[1])
