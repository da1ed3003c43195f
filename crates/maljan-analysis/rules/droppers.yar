// Droppers and loaders: payloads carried inside another file (identification: the carrier decides
// what it means), auto-running macros and download-and-run scripts (detection, each naming the fact
// of maljan's facts table it shows).

rule Dropper_Embedded_PE
{
    meta:
        purpose = "identification"
        fact = "carries_executable"
        description = "A second PE image inside the file (DOS stub text past the first kilobyte)"
        category = "dropper"
    strings:
        $stub = "This program cannot be run in DOS mode"
    condition:
        // The stub text sits 0x4E bytes into an MS linker's image, 0x40 into others'.
        for any i in (1..#stub) : (@stub[i] > 1024 and
            (uint16(@stub[i] - 0x4E) == 0x5A4D or uint16(@stub[i] - 0x40) == 0x5A4D))
}

rule Dropper_Office_Macro_Autoexec
{
    meta:
        purpose = "detection"
        fact = "auto_exec_macro"
        description = "Office macro that runs on open and starts a program or a shell"
        category = "dropper"
    strings:
        $auto1 = "AutoOpen" nocase
        $auto2 = "Document_Open" nocase
        $auto3 = "Workbook_Open" nocase
        $auto4 = "Auto_Open" nocase
        $run1 = "Shell" nocase
        $run2 = "WScript.Shell" nocase
        $run3 = "CreateObject" nocase
        $vba = "Attribute VB_" nocase
    condition:
        any of ($auto*) and any of ($run*) and $vba
}

rule Downloader_PowerShell_Cradle
{
    meta:
        purpose = "detection"
        fact = "download_execute"
        description = "PowerShell download cradle or encoded command"
        category = "downloader"
    strings:
        $dl1 = "DownloadString" nocase ascii wide
        $dl2 = "DownloadFile" nocase ascii wide
        $dl3 = "Invoke-WebRequest" nocase ascii wide
        $dl4 = "Net.WebClient" nocase ascii wide
        $ex1 = "IEX" ascii wide
        $ex2 = "Invoke-Expression" nocase ascii wide
        $ex3 = "-EncodedCommand" nocase ascii wide
        $ex4 = "FromBase64String" nocase ascii wide
        $ps = "powershell" nocase ascii wide
    condition:
        (any of ($dl*) and any of ($ex*)) or ($ps and $ex3)
}
