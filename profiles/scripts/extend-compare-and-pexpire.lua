-- An extend script: re-arm the lock to the TTL only while it holds our token.
-- Reply 1 = re-armed, 0 = lost.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
