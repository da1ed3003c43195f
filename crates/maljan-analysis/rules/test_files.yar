// Test files every scanner must know. Detection rules (purpose = "detection"): known-bad content,
// the one kind of built-in rule maljan's verdict counts as a known-bad signature; `family` names it.

rule EICAR_test_file
{
    meta:
        purpose = "detection"
        family = "EICAR-Test-File"
        description = "The EICAR anti-malware test file (harmless by design)"
        category = "test"
        reference = "https://www.eicar.org/download-anti-malware-testfile/"
    strings:
        $eicar = "X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
    condition:
        $eicar at 0 or ($eicar and filesize < 256)
}
