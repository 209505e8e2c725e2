-- progress.lua: record how far a running attempt got (jobs.Progress), fenced
-- by the attempt's ledger token: only the attempt that runs the job may
-- write it. The job's 'progress' field holds the latest report as JSON
-- (done, total and note as given, the attempt number, its token, the time);
-- it stays after the attempt ends, and the next attempt's first report
-- replaces it.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 job id   3 the attempt's token (decimal)   4 done   5 total (0: unknown)
-- 6 note (may be empty)
-- Reply: 1 when recorded; 0 when the job is not running under that token
--        (a newer attempt took over, the attempt ended, no such job).
local id, tok = ARGV[2], ARGV[3]
local k = jobkey(id)
local h = redis.call('HMGET', k, 'state', 'token', 'attempts')
if h[1] ~= 'running' or not h[2] or u64_cmp(u64_norm(h[2]), u64_norm(tok)) ~= 0 then return 0 end
redis.call('HSET', k, 'progress', cjson.encode({done = ARGV[4], total = ARGV[5], note = ARGV[6],
  attempt = h[3] or '0', token = h[2], at = snow}))
return 1
