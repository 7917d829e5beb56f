-- wrk cross-check of servekit-loadgen: POST /v2/models/add_sub/infer with the body
-- servekit-loadgen builds for add_sub (INPUT0 and INPUT1, FP32 [1,16]), over keep-alive
-- connections, closed loop. With the server on port 8000:
--
--   wrk -t1 -c64 -d10s --latency -s bench/wrk/infer_add_sub.lua http://127.0.0.1:8000/v2/models/add_sub/infer
--
-- and compare with
--
--   build/bench/servekit-loadgen --model add_sub --connections 64 --duration 10
--
-- wrk counts any answer as a request and lists non-2xx answers apart ("Non-2xx or 3xx
-- responses"): there should be none.

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,16],"data":[0,0.5,1,1.5,2,2.5,3,3.5,4,4.5,5,5.5,6,6.5,7,7.5]},{"name":"INPUT1","datatype":"FP32","shape":[1,16],"data":[0,0.5,1,1.5,2,2.5,3,3.5,4,4.5,5,5.5,6,6.5,7,7.5]}]}'
