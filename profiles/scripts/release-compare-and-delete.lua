-- A correct release: compare the token and delete in one atomic step.
-- lockbench's convention: KEYS[1] = the lock key, ARGV[1] = the holder's token,
-- ARGV[2] = the TTL in ms. Reply 1 = deleted, 0 = nothing deleted, -1 = held by another.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
if v then
  return -1
end
return 0
