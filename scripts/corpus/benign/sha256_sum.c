// maljan-corpus: prints the SHA-256 of each file named on the command line (CNG).
// link: -lbcrypt
// Corpus data for the verdict benchmark: an ordinary program.
#include <windows.h>
#include <bcrypt.h>
#include <stdio.h>

int main(int argc, char **argv) {
    BCRYPT_ALG_HANDLE alg;
    if (BCryptOpenAlgorithmProvider(&alg, BCRYPT_SHA256_ALGORITHM, NULL, 0)) return 1;
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) { perror(argv[i]); continue; }
        BCRYPT_HASH_HANDLE h;
        BCryptCreateHash(alg, &h, NULL, 0, NULL, 0, 0);
        static unsigned char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0) BCryptHashData(h, buf, (ULONG)n, 0);
        unsigned char digest[32];
        BCryptFinishHash(h, digest, sizeof digest, 0);
        BCryptDestroyHash(h);
        fclose(f);
        for (int j = 0; j < 32; j++) printf("%02x", digest[j]);
        printf("  %s\n", argv[i]);
    }
    BCryptCloseAlgorithmProvider(alg, 0);
    return 0;
}
