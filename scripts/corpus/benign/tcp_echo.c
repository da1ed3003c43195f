// maljan-corpus: a TCP echo server on a port given on the command line (Winsock).
// link: -lws2_32
// Corpus data for the verdict benchmark: an ordinary program.
#include <winsock2.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    WSADATA wsa;
    WSAStartup(MAKEWORD(2, 2), &wsa);
    SOCKET s = socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons((u_short)(argc > 1 ? atoi(argv[1]) : 7007));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&addr, sizeof addr) || listen(s, 4)) {
        fprintf(stderr, "cannot listen: %d\n", WSAGetLastError());
        return 1;
    }
    for (;;) {
        SOCKET c = accept(s, NULL, NULL);
        char buf[4096];
        int n;
        while ((n = recv(c, buf, sizeof buf, 0)) > 0) send(c, buf, n, 0);
        closesocket(c);
    }
}
