wrk.method = "POST"
wrk.body = '{"Name":"bench item"}'
wrk.headers["Content-Type"] = "application/json"
