import Foundation
import Mirrorgate

MirrorgateCommand.main()
