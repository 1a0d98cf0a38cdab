import socket,time,sys,json
# pipeline many submissions, read one byte every 20s
s=socket.create_connection(("127.0.0.1",18790))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
n=int(sys.argv[1])
req=b""
for i in range(n):
    body=json.dumps({"prompt":"uniqueprompt-%d"%(2000+i)}).encode()
    req+=b"POST /v1/gen-dev HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"%len(body)+body
s.sendall(req)
t0=time.time(); got=b""
while time.time()-t0<float(sys.argv[2]):
    time.sleep(20)
    try:
        b=s.recv(1)
        got+=b
        print(int(time.time()-t0),"got",len(got),b,flush=True)
        if not b: break
    except Exception as e:
        print("err",e,flush=True); break
