<?php
// A service that locks with Symfony Lock's RedisStore (Debian's php-symfony-lock 5.4 on
// phpredis): `createLock($key, $ttl, false)`, `acquire(false)`, `release()`. The store keeps a
// lock as a sorted set of tokens whose expiry a Lua script sets (PEXPIREAT), and its release
// script removes only its own token: the key disappears when its last token goes.
//
// Each cycle picks one of --keys keys, takes its lock (trying again every --retry-ms while it is
// busy), works for a section drawn from uniform(--min-ms, --max-ms), and releases. A section
// longer than --ttl-ms outlives its lock: `isExpired()` says so, and `release()` returns
// quietly having deleted nothing. Every hold is written to $LOCKBENCH_APP_LOG, one JSON line, on
// CLOCK_MONOTONIC (hrtime): see ../python/applog.py for the fields.
//
//   lockbench observe -- php examples/apps/php/symfony_lock.php --keys 2 --ttl-ms 100
//
// Needs php-cli, php-redis and php-symfony-lock (apt-get install -y php-cli php-redis php-symfony-lock).

require '/usr/share/php/Symfony/Component/Lock/autoload.php';

use Symfony\Component\Lock\Exception\LockAcquiringException;
use Symfony\Component\Lock\Exception\LockExpiredException;
use Symfony\Component\Lock\LockFactory;
use Symfony\Component\Lock\Store\RedisStore;

function fail(string $msg): void
{
    fwrite(STDERR, "symfony_lock.php: $msg\n");
    exit(2);
}

// One JSON line per hold; one fwrite of one short line on an append-mode file, so copies can
// share one log.
function log_hold($log, array $a, string $key, float $section, int $sent, int $start, int $end, int $done, bool $held, string $release): void
{
    if ($log === null) {
        return;
    }
    fwrite($log, json_encode([
        'app' => 'symfony', 'pid' => getmypid(), 'key' => $key, 'ttl_ms' => $a['ttl-ms'],
        'planned_ms' => $section, 'acquire_sent_ns' => $sent, 'start_ns' => $start,
        'end_ns' => $end, 'release_done_ns' => $done, 'held' => $held, 'release' => $release,
    ]) . "\n");
    fflush($log);
}

// Whether acquire() failed because the lock had expired meanwhile (a LockExpiredException
// inside the LockAcquiringException), not for an error of the store.
function expired_in_acquire(\Throwable $e): bool
{
    for (; $e !== null; $e = $e->getPrevious()) {
        if ($e instanceof LockExpiredException) {
            return true;
        }
    }
    return false;
}

$defaults = ['keys' => 3, 'ttl-ms' => 100, 'min-ms' => 20, 'max-ms' => 80, 'cycles' => 20, 'seed' => 1, 'retry-ms' => 5, 'prefix' => 'app:lock:', 'start-together' => 1];
$a = $defaults;
$argv_ = array_slice($argv, 1);
for ($i = 0; $i < count($argv_); $i += 2) {
    $name = preg_replace('/^--/', '', $argv_[$i]);
    if (!array_key_exists($name, $defaults) || !isset($argv_[$i + 1])) {
        fail("unknown flag or missing value: {$argv_[$i]} (flags: --" . implode(' --', array_keys($defaults)) . ')');
    }
    $v = $argv_[$i + 1];
    if ($name !== 'prefix' && !is_numeric($v)) {
        fail("--$name needs a number, got $v");
    }
    $a[$name] = $name === 'prefix' ? $v : $v + 0;
}

// REDIS_URL, else REDIS_HOST/REDIS_PORT, else localhost:6379.
$redis = new Redis();
$url = getenv('REDIS_URL');
if ($url !== false && $url !== '') {
    $u = parse_url($url);
    $redis->connect($u['host'] ?? 'localhost', $u['port'] ?? 6379);
    if (isset($u['pass'])) {
        $redis->auth(isset($u['user']) ? [rawurldecode($u['user']), rawurldecode($u['pass'])] : rawurldecode($u['pass']));
    }
    if (isset($u['path']) && trim($u['path'], '/') !== '') {
        $redis->select((int) trim($u['path'], '/'));
    }
} else {
    $redis->connect(getenv('REDIS_HOST') ?: 'localhost', (int) (getenv('REDIS_PORT') ?: 6379));
}

$factory = new LockFactory(new RedisStore($redis));
mt_srand($a['seed'] * 1000003 + getmypid());
// --start-together N: count in at PREFIXstarted, wait until N copies have (see applog.py).
if ($a['start-together'] > 1) {
    $redis->incr($a['prefix'] . 'started');
    while ((int) $redis->get($a['prefix'] . 'started') < $a['start-together']) {
        usleep(2000);
    }
}
$log = getenv('LOCKBENCH_APP_LOG') ? fopen(getenv('LOCKBENCH_APP_LOG'), 'a') : null;
for ($c = 0; $c < $a['cycles']; $c++) {
    $key = $a['prefix'] . mt_rand(0, $a['keys'] - 1);
    $section = $a['min-ms'] + (mt_rand() / mt_getrandmax()) * ($a['max-ms'] - $a['min-ms']);
    $lock = $factory->createLock($key, $a['ttl-ms'] / 1000.0, false);
    while (true) {
        $sent = hrtime(true);
        try {
            if ($lock->acquire(false)) {
                break;
            }
        } catch (LockAcquiringException $e) {
            // Taking the lock outlasted its TTL (acquire() throws, the lock's expiry already
            // moved): the key is ours until it expires. Release it and try again; the hold,
            // seen by a proxy from the store's reply to this release, is logged with no time
            // between the two.
            if (!expired_in_acquire($e)) {
                throw $e;
            }
            $caught = hrtime(true);
            $lock->release();
            log_hold($log, $a, $key, 0.0, $sent, $caught, $caught, hrtime(true), false, 'returned');
        }
        usleep((int) ($a['retry-ms'] * 1000));
    }
    $start = hrtime(true);
    usleep((int) ($section * 1000)); // the work the lock protects
    $held = !$lock->isExpired(); // what the library believes, from its own clock
    $end = hrtime(true);
    $lock->release();
    $done = hrtime(true);
    log_hold($log, $a, $key, $section, $sent, $start, $end, $done, $held, 'returned');
}
