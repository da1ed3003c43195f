// Packers, protectors and installers, by the marks their stubs leave. Each needs a PE (MZ at 0)
// and two independent marks, so a string alone in a document does not fire. Identification rules
// (purpose = "identification"): they say what built or wraps a program, which is identity, not
// malice — maljan's verdict never counts them as strong.

rule Packer_UPX
{
    meta:
        purpose = "identification"
        description = "UPX-packed executable (section names UPX0/UPX1 or the UPX! header)"
        category = "packer"
    strings:
        $s0 = "UPX0\x00"
        $s1 = "UPX1\x00"
        $magic = "UPX!"
    condition:
        (uint16(0) == 0x5A4D or uint32(0) == 0x464C457F) and
        ((($s0 in (0..1024)) and ($s1 in (0..1024))) or ($magic in (0..4096) and ($s0 or $s1)) or
         (uint32(0) == 0x464C457F and $magic in (0..1024)))
}

rule Packer_MPRESS
{
    meta:
        purpose = "identification"
        description = "MPRESS-packed executable (sections .MPRESS1/.MPRESS2)"
        category = "packer"
    strings:
        $s1 = ".MPRESS1"
        $s2 = ".MPRESS2"
    condition:
        uint16(0) == 0x5A4D and $s1 in (0..1024) and $s2 in (0..1024)
}

rule Packer_ASPack
{
    meta:
        purpose = "identification"
        description = "ASPack-packed executable (sections .aspack/.adata)"
        category = "packer"
    strings:
        $s1 = ".aspack\x00"
        $s2 = ".adata\x00"
    condition:
        uint16(0) == 0x5A4D and $s1 in (0..1024) and $s2 in (0..1024)
}

rule Protector_Themida_WinLicense
{
    meta:
        purpose = "identification"
        description = "Themida / WinLicense protected executable (section names)"
        category = "protector"
    strings:
        $t1 = ".themida"
        $t2 = ".winlice"
        $t3 = "Themida"
    condition:
        uint16(0) == 0x5A4D and (($t1 in (0..1024)) or ($t2 in (0..1024)) or ($t3 in (0..1024)))
}

rule Protector_VMProtect
{
    meta:
        purpose = "identification"
        description = "VMProtect protected executable (sections .vmp0/.vmp1)"
        category = "protector"
    strings:
        $v0 = ".vmp0\x00"
        $v1 = ".vmp1\x00"
    condition:
        uint16(0) == 0x5A4D and $v0 in (0..1024) and $v1 in (0..1024)
}

rule Installer_NSIS
{
    meta:
        purpose = "identification"
        description = "Nullsoft (NSIS) installer: the stub's marker and its compressed data header"
        category = "installer"
    strings:
        $sig = { EF BE AD DE 4E 75 6C 6C 73 6F 66 74 49 6E 73 74 }  // ...NullsoftInst
        $nsis = "Nullsoft Install System"
    condition:
        uint16(0) == 0x5A4D and ($sig or $nsis)
}

rule Installer_Inno_Setup
{
    meta:
        purpose = "identification"
        description = "Inno Setup installer (its setup loader's marks)"
        category = "installer"
    strings:
        $a = "Inno Setup Setup Data"
        $b = "InnoSetupLdrWindow"
        $c = "Inno Setup Messages"
    condition:
        uint16(0) == 0x5A4D and any of them
}

rule Packer_PyInstaller
{
    meta:
        purpose = "identification"
        description = "PyInstaller bundle (its CArchive cookie)"
        category = "packer"
    strings:
        $cookie = { 4D 45 49 0C 0B 0A 0B 0E }
    condition:
        (uint16(0) == 0x5A4D or uint32(0) == 0x464C457F or uint32(0) == 0xFEEDFACF or uint32(0) == 0xCFFAEDFE) and $cookie
}
